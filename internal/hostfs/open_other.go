//go:build !linux

package hostfs

func newOpener(dir string) (opener, error) { return newRootOpener(dir) }
