//go:build cgo

package cipher

// haveCgo says whether libmcrypt is built in.
const haveCgo = true
