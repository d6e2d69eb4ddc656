module nsca_fast

go 1.26.0

require (
	github.com/golang/glog v1.2.5
	github.com/pires/go-proxyproto v0.15.0
	golang.org/x/sys v0.50.0
)

require github.com/google/go-cmp v0.7.0 // indirect
