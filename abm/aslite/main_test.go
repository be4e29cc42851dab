package aslite

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when a server goroutine outlives the tests.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // TestDurableKill9's server process
	}
	code := m.Run()
	if code == 0 {
		if leaked := serverGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked aslite goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func serverGoroutines() string {
	var leaked string
	for i := 0; i < 100; i++ {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = ""
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "aslite.(*Server)") && !strings.Contains(g, "TestMain") {
				leaked += g + "\n\n"
			}
		}
		if leaked == "" {
			return ""
		}
		time.Sleep(10 * time.Millisecond)
	}
	return leaked
}
