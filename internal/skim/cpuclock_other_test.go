//go:build !unix

package skim

func cpuNow() int64 { return -1 }
