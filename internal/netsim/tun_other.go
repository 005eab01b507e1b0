//go:build !linux

package netsim

import (
	"fmt"
	"os"
	"runtime"
)

func platformSupported() error {
	return fmt.Errorf("%w: needs Linux, this is %s", ErrUnsupported, runtime.GOOS)
}

func openTUN(ns, name string) (*os.File, error) { return nil, platformSupported() }
