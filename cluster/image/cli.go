package image

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

const usage = `Usage: images [flags]

Builds the testbed's container images as archives, without a container
engine, a daemon or a registry: chf (chf and aslite), loadgen, and pause
(the node's sandbox image). Each is static binaries on scratch, plus, for
chf and loadgen, passwd/group (user nonroot, 65532), the host's CA bundle
and /tmp. Import one into a containerd node with
  ctr -n k8s.io images import <out>/<name>.tar
The same inputs give the same digest (SOURCE_DATE_EPOCH sets the creation
time; default the Unix epoch).

Prints one line per image: reference, archive, manifest digest.

Flags:
`

// Main is the images command: it parses args, optionally compiles the
// binaries (--build), builds the archives and prints one line per image on
// stdout. It returns the exit code: 0 done, 1 failed, 2 bad usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binDir := fs.String("bin-dir", "bin/static", "directory of the static binaries chf, aslite, loadgen and pause (`make images` or --build writes them)")
	outDir := fs.String("out", "bin/images", "directory receiving one <name>.tar per image")
	repo := fs.String("repo", DefaultRepo, "repository prefix: references are <repo>/<name>:<tag> (the charts' image.repository is chf-testbed/chf)")
	tag := fs.String("tag", "", "image tag (default: the appVersion of <src>/"+ChartFile+", the tag the charts use)")
	only := fs.String("only", "", "comma-separated images to build, of chf, loadgen, pause (default: all)")
	build := fs.Bool("build", false, "compile the static binaries from <src> into --bin-dir first (CGO_ENABLED=0 go build -trimpath)")
	src := fs.String("src", ".", "repository root: the module compiled by --build and the chart read for the default --tag")
	version := fs.String("version", "", "main.version stamped into the binaries by --build (default: the tag)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2 // flag printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "images: unexpected argument %q (see -h)\n", fs.Arg(0))
		return 2
	}
	var names []string
	if *only != "" {
		for _, n := range strings.Split(*only, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		if _, err := Select(names); err != nil {
			fmt.Fprintf(stderr, "images: --only: %v\n", err)
			return 2
		}
	}
	if *repo == "" {
		fmt.Fprintln(stderr, "images: --repo: empty")
		return 2
	}
	if *tag == "" {
		t, err := DefaultTag(*src)
		if err != nil {
			fmt.Fprintf(stderr, "images: %v (pass --tag, or --src with the repository root)\n", err)
			return 1
		}
		*tag = t
	}
	if _, err := name.NewTag(Ref(*repo, "chf", *tag)); err != nil {
		fmt.Fprintf(stderr, "images: --repo %q or --tag %q do not make a valid reference: %v\n", *repo, *tag, err)
		return 2
	}
	var created time.Time
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		t, err := sourceDateEpoch(v)
		if err != nil {
			fmt.Fprintf(stderr, "images: %v\n", err)
			return 2
		}
		created = t
	}
	if *build {
		if *version == "" {
			*version = *tag
		}
		fmt.Fprintf(stderr, "images: compiling %s into %s\n", strings.Join(Packages, " "), *binDir)
		if err := BuildBinaries(ctx, *src, *binDir, *version); err != nil {
			fmt.Fprintf(stderr, "images: %v\n", err)
			return 1
		}
	}
	built, err := Build(ctx, Options{
		BinDir: *binDir, OutDir: *outDir, Repo: *repo, Tag: *tag,
		Names: names, Created: created,
	})
	for _, b := range built {
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", b.Ref, b.Path, b.Digest)
	}
	if err != nil {
		fmt.Fprintf(stderr, "images: %v\n", err)
		return 1
	}
	return 0
}
