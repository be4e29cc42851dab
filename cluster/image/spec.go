// Package image builds the testbed's container images as archives that
// `ctr -n k8s.io images import` (and `docker load`) accept, without a
// container engine, a daemon or a registry: each image is one tar layer on
// an empty image (scratch), holding static binaries already compiled and,
// for the service images, the few files they need (passwd and group with
// the non-root user 65532, a CA bundle copied from the host, /tmp). Same
// inputs give the same image digest.
//
// The images are chf (chf and aslite), loadgen, and pause, a sandbox
// ("pause") image of the project's own so a node needs no registry.
// The Dockerfile at the repository root describes the chf and loadgen
// images for Docker users; a test keeps both descriptions equal.
package image

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultRepo is the repository prefix of the images' references, the one
// the charts' values use (image.repository: chf-testbed/chf).
const DefaultRepo = "chf-testbed"

// PauseName is the name of the sandbox image; see PauseRef.
const PauseName = "pause"

// NonRoot is the uid and gid the service images run as (distroless's
// "nonroot", the charts' runAsUser and runAsGroup).
const NonRoot = 65532

// PauseUser is the user the pause image runs as: 65535, as the upstream
// Kubernetes pause image (registry.k8s.io/pause) does.
const PauseUser = "65535:65535"

// Spec describes one image.
type Spec struct {
	// Name is the image's name: its reference is <repo>/<Name>:<tag> and
	// its archive <Name>.tar.
	Name string
	// Binaries are file names in the binary directory, installed in Dir
	// with mode 0755.
	Binaries []string
	// Dir is where the binaries go in the image.
	Dir string
	// Entrypoint is the image config's Entrypoint.
	Entrypoint []string
	// User is the image config's User, "uid:gid".
	User string
	// Ports are the exposed ports, "8080/tcp".
	Ports []string
	// WorkingDir is the image config's WorkingDir.
	WorkingDir string
	// Env is the image config's Env, "KEY=value".
	Env []string
	// Rootfs adds the files a Go service needs on scratch: /etc/passwd and
	// /etc/group (root, nonroot 65532, nobody 65534), /etc/nsswitch.conf,
	// the CA bundle at /etc/ssl/certs/ca-certificates.crt, /tmp (1777) and
	// /home/nonroot. Without it the image holds its binaries only.
	Rootfs bool
}

// CABundle is where the images hold the CA bundle, and where it is
// copied from on the build host.
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// Specs returns the images: chf, loadgen and pause. The caller owns the
// returned slice.
func Specs() []Spec {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=" + CABundle,
	}
	user := fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	return []Spec{
		{
			Name:       "chf",
			Binaries:   []string{"chf", "aslite"},
			Dir:        "/usr/local/bin",
			Entrypoint: []string{"/usr/local/bin/chf"},
			User:       user,
			// cgw 8080, ocp 8081, abm 8082 (HTTP), Diameter 3868, aslite 3000.
			Ports:      []string{"8080/tcp", "8081/tcp", "8082/tcp", "3868/tcp", "3000/tcp"},
			WorkingDir: "/home/nonroot",
			Env:        env,
			Rootfs:     true,
		},
		{
			Name:       "loadgen",
			Binaries:   []string{"loadgen"},
			Dir:        "/usr/local/bin",
			Entrypoint: []string{"/usr/local/bin/loadgen"},
			User:       user,
			WorkingDir: "/home/nonroot",
			Env:        env,
			Rootfs:     true,
		},
		{
			Name:       PauseName,
			Binaries:   []string{"pause"},
			Dir:        "/",
			Entrypoint: []string{"/pause"},
			User:       PauseUser,
			WorkingDir: "/",
		},
	}
}

// Ref returns the reference <repo>/<name>:<tag>.
func Ref(repo, name, tag string) string {
	return repo + "/" + name + ":" + tag
}

// PauseRef returns the pause image's reference, for containerd's
// sandbox_image (containerd reads it as docker.io/<repo>/pause:<tag>, the
// name `ctr images import` gives the archive's image).
func PauseRef(repo, tag string) string {
	return Ref(repo, PauseName, tag)
}

// ChartFile is the chart whose appVersion is the default tag, relative to
// the repository root.
const ChartFile = "charts/chf/Chart.yaml"

var appVersionRE = regexp.MustCompile(`(?m)^appVersion:[ \t]*"?([^"\s#]+)"?`)

// DefaultTag returns the chf chart's appVersion, read from
// root/charts/chf/Chart.yaml: the tag the charts use when image.tag is
// empty.
func DefaultTag(root string) (string, error) {
	p := filepath.Join(root, ChartFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("cannot read the default tag: %w", err)
	}
	m := appVersionRE.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("cannot read the default tag: no appVersion in %s", p)
	}
	return strings.TrimSpace(string(m[1])), nil
}
