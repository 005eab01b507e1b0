//go:build !linux

package main

// followGoRun does nothing here: only Linux can signal a process when its parent dies.
func followGoRun() {}
