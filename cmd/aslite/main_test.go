package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// build compiles the package pkg into dir with the version set as the
// Makefile does.
func build(t *testing.T, ctx context.Context, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	if out, err := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version=v0.0.0-test", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("cannot build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// TestBinary runs the built aslite as a user would: --version, the same
// resolved configuration as `chf aslite` from flags and CHF_* variables,
// exit 2 on a bad flag, serving, and a clean exit on SIGTERM.
func TestBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	aslite := build(t, ctx, dir, "github.com/chf-testbed/testbed/cmd/aslite")
	chf := build(t, ctx, dir, "github.com/chf-testbed/testbed/cmd/chf")

	if out, err := exec.CommandContext(ctx, aslite, "--version").Output(); err != nil || string(out) != "aslite v0.0.0-test\n" {
		t.Errorf("--version: %q, %v", out, err)
	}
	env := append(os.Environ(), "CHF_NAMESPACE=chf,other", "CHF_COMMIT=interval")
	run := func(args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, args[0], args[1:]...)
		c.Env = env
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return string(out)
	}
	got := run(aslite, "--check-flags", "--listen", "127.0.0.1:3999")
	if want := run(chf, "aslite", "--check-flags", "--listen", "127.0.0.1:3999"); got != want {
		t.Errorf("aslite --check-flags:\n%s\nchf aslite --check-flags:\n%s", got, want)
	}
	for _, want := range []string{"listen=127.0.0.1:3999", "namespace=chf,other", "commit=interval", "runtime-profile=production"} {
		if !strings.Contains(got, want) {
			t.Errorf("--check-flags lacks %q: %s", want, got)
		}
	}

	err := exec.CommandContext(ctx, aslite, "--no-such-flag").Run()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("bad flag: %v, want exit status 2", err)
	}

	// A bad runtime profile, and the flags it replaced, exit 2 naming it.
	for _, args := range [][]string{{"--runtime-profile", "turbo"}, {"--sysmon-park"}, {"--sched-batch=false"}} {
		out, err := exec.CommandContext(ctx, aslite, args...).CombinedOutput()
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "runtime-profile") {
			t.Errorf("%v: %v, %s; want exit status 2 naming --runtime-profile", args, err, out)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := exec.CommandContext(ctx, aslite, "--listen", addr)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			srv.Process.Kill()
			t.Fatalf("aslite did not listen on %s within 10 s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(10 * time.Second):
		srv.Process.Kill()
		t.Errorf("aslite did not exit within 10 s of SIGTERM")
	}
}
