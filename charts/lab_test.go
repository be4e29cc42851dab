package charts_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// labHelper is the test binary re-executed inside a lab namespace: "listen"
// accepts one connection on addr and echoes it, "dial" sends a line to addr
// and expects it back. It returns the process exit code.
func labHelper(mode, addr string) int {
	switch mode {
	case "listen":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer ln.Close()
		fmt.Println("ready")
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(c, io.LimitReader(c, 5)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "dial":
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "ping\n" {
			fmt.Fprintf(os.Stderr, "echo: %q %v\n", got, err)
			return 1
		}
		return 0
	}
	return 2
}

// TestLab sets up every network model of deploy/lab/lab.sh in namespaces
// of its own, carries a TCP exchange from a pod (or node) on node 1 to one
// on node 2, the client pinned to CPU 0 with taskset, and tears the lab
// down, checking that no namespace is left behind.
func TestLab(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lab needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "bash", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("lab needs %s", tool)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("..", "deploy", "lab", "lab.sh"))
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("chft%d", os.Getpid()%100000)
	labFor := func(t *testing.T, prefix string) (func(ctx context.Context, args ...string) *exec.Cmd, []string, func() []string) {
		env := append(os.Environ(), "LAB_PREFIX="+prefix, "LAB_STATE_DIR="+t.TempDir())
		lab := func(ctx context.Context, args ...string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
			cmd.Env = env
			return cmd
		}
		leftovers := func() []string {
			out, _ := exec.Command("ip", "netns", "list").Output()
			var left []string
			for l := range strings.Lines(string(out)) {
				if strings.HasPrefix(l, prefix) {
					left = append(left, strings.Fields(l)[0])
				}
			}
			return left
		}
		return lab, env, leftovers
	}
	// Probe: can namespaces be created here at all?
	probe := base + "-probe"
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("cannot create network namespaces here: %v %s", err, out)
	}
	exec.Command("ip", "netns", "del", probe).Run()

	for i, model := range []string{"baremetal", "calico-noencap", "calico-ipip", "calico-vxlan", "sriov"} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			prefix := fmt.Sprintf("%s%c-", base, 'a'+i)
			lab, env, leftovers := labFor(t, prefix)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			t.Cleanup(func() {
				lab(context.Background(), "down").Run()
				if left := leftovers(); len(left) != 0 {
					t.Errorf("namespaces left after down: %v", left)
				}
			})
			if out, err := lab(ctx, "up", model, "-n", "2", "-p", "1").CombinedOutput(); err != nil {
				if model == "calico-ipip" && strings.Contains(string(out), "no IP-in-IP") {
					if left := leftovers(); len(left) != 0 {
						t.Errorf("failed setup left namespaces: %v", left)
					}
					t.Skipf("kernel without ipip: %s", out)
				}
				t.Fatalf("lab up %s: %v\n%s", model, err, out)
			}
			src, dst := prefix+"n1p1", prefix+"n2p1"
			if model == "baremetal" {
				src, dst = prefix+"n1", prefix+"n2"
			}
			addrOut, err := lab(ctx, "addr", dst).Output()
			if err != nil {
				t.Fatalf("lab addr %s: %v", dst, err)
			}
			addr := net.JoinHostPort(strings.TrimSpace(string(addrOut)), "7777")

			srv := exec.CommandContext(ctx, "ip", "netns", "exec", dst, self)
			srv.Env = append(os.Environ(), "CHARTS_LAB_HELPER=listen", "CHARTS_LAB_ADDR="+addr)
			stdout, err := srv.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			srv.Stderr = os.Stderr
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Wait()
			if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
				srv.Process.Kill()
				t.Fatalf("listener in %s did not start: %q %v", dst, line, err)
			}
			cli := lab(ctx, "exec", src, "-c", "0", "--", self)
			cli.Env = append(env, "CHARTS_LAB_HELPER=dial", "CHARTS_LAB_ADDR="+addr)
			if out, err := cli.CombinedOutput(); err != nil {
				srv.Process.Kill()
				t.Fatalf("%s -> %s (%s): %v\n%s", src, dst, addr, err, out)
			}
		})
	}
}
