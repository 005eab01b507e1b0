package netsim

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestHelperEcho is not a test: it is the echo server and client that TestLinkDelaysBothWays
// runs inside the namespaces (NETSIM_HELPER says which).
func TestHelperEcho(t *testing.T) {
	addr := os.Getenv("NETSIM_ADDR")
	switch os.Getenv("NETSIM_HELPER") {
	case "echo":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	case "client":
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		r := bufio.NewReader(c)
		start := time.Now()
		fmt.Fprintln(c, "ping")
		if _, err := r.ReadString('\n'); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("rtt %d\n", time.Since(start))
		os.Exit(0)
	}
}
