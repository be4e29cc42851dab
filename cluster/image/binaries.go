package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Packages are the commands the images take, relative to the repository
// root; BuildBinaries compiles them.
var Packages = []string{"./cmd/chf", "./cmd/aslite", "./cmd/loadgen", "./cluster/image/pause"}

// BuildArgs returns the `go build` arguments BuildBinaries uses: a static,
// reproducible build (no paths, no VCS stamp, no symbols) with
// main.version set. The Dockerfile's build stage uses the same flags.
func BuildArgs(outDir, version string) []string {
	args := []string{"build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version=" + version,
		"-o", outDir + string(filepath.Separator)}
	return append(args, Packages...)
}

// BuildBinaries compiles Packages from the module at srcRoot into outDir
// with CGO_ENABLED=0 (static: the images have no C library), for the
// GOOS/GOARCH of the environment (linux unless GOOS says otherwise). It
// runs the go command found in PATH (or $GO) and returns its output in the
// error when it fails.
func BuildBinaries(ctx context.Context, srcRoot, outDir, version string) error {
	if version == "" {
		version = "dev"
	}
	out, err := filepath.Abs(outDir)
	if err != nil {
		return fmt.Errorf("cannot build binaries: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("cannot build binaries: %w", err)
	}
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, BuildArgs(out, version)...)
	cmd.Dir = srcRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if os.Getenv("GOOS") == "" {
		cmd.Env = append(cmd.Env, "GOOS=linux")
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cannot build binaries (%s %s): %w\n%s", goCmd, strings.Join(cmd.Args[1:], " "), err, buf.String())
	}
	return nil
}
