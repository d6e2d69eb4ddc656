module nsca_fast

go 1.26.0

require (
	github.com/golang/glog v1.2.5
	golang.org/x/sys v0.50.0
)
