//go:build !linux

package target

import "context"

// waitPidfd: only Linux has pidfds; the caller polls /proc.
func waitPidfd(context.Context, int) (gone, ok bool) { return false, false }
