// goprof: writes profiles with Go's own runtime/pprof, for the pprof tests
// (tests/server/pprof/pprof_test.sh). Standard library only.
//
//	goprof cpu FILE    a CPU profile of a busy loop (samples/count, cpu/nanoseconds)
//	goprof heap FILE   a heap profile (alloc_objects, alloc_space, inuse_objects, inuse_space)
//	goprof goroutine FILE   a goroutine profile (goroutine/count: a type luaflame has no metric for)
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

var sink [][]byte

//go:noinline
func leaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i % 7
	}
	return s
}

//go:noinline
func busy(d time.Duration) int {
	s := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		s += leaf(20000)
	}
	return s
}

//go:noinline
func allocate(n int) {
	for i := 0; i < n; i++ {
		sink = append(sink, make([]byte, 4096))
	}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goprof cpu|heap|goroutine FILE")
		os.Exit(2)
	}
	f, err := os.Create(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	switch os.Args[1] {
	case "cpu":
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(busy(700 * time.Millisecond))
		pprof.StopCPUProfile()
	case "heap":
		runtime.MemProfileRate = 4096
		allocate(2000)
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "goroutine":
		if err := pprof.Lookup("goroutine").WriteTo(f, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		os.Exit(2)
	}
}
