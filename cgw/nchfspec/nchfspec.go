// Package nchfspec validates Nchf_ConvergedCharging requests and responses
// against the 3GPP OpenAPI definition (TS32291_Nchf_ConvergedCharging.yaml,
// TS 32.291 V17.9.0, API 3.1.6, and the files it references) with
// kin-openapi. Tests of the CGW and the end-to-end tests use it so that
// every exchange they make is checked against the spec.
//
// The 3GPP files (the root and every file it references, unmodified, with
// their sha256sums) are kept in testdata/3gpp-rel17 of this package, so a
// clone tests itself wherever it lies; CHF_SPECS_DIR points elsewhere.
// Load reports ErrMissing when they are absent; tests skip then, except
// when CI=true, where they fail.
package nchfspec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/chf-testbed/testbed/internal/readfile"
)

// RootFile is the Nchf_ConvergedCharging definition's file name.
const RootFile = "TS32291_Nchf_ConvergedCharging.yaml"

// EnvDir names the environment variable that overrides the spec directory.
const EnvDir = "CHF_SPECS_DIR"

// ErrMissing is returned by Load when the spec files are not there.
var ErrMissing = errors.New("nchfspec: 3GPP OpenAPI files not found")

// Validator checks Nchf exchanges. Safe for concurrent use.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

// Dir returns the spec directory: $CHF_SPECS_DIR, or this package's
// testdata/3gpp-rel17 in the repository (the nearest ancestor of the
// working directory holding go.mod).
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cannot get working directory: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "cgw", "nchfspec", "testdata", "3gpp-rel17"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("cannot find the repository root above %s", wd)
		}
	}
}

// Load reads and resolves the definition in dir ("" = Dir()).
func Load(dir string) (*Validator, error) {
	if dir == "" {
		var err error
		if dir, err = Dir(); err != nil {
			return nil, err
		}
	}
	root := filepath.Join(dir, RootFile)
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrMissing, root)
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	loader.ReadFromURIFunc = openapi3.URIMapCache(readLocal)
	doc, err := loader.LoadFromFile(root)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s: %w", root, err)
	}
	// Match on the path only: the servers entry is {apiRoot}/nchf-convergedcharging/v3.
	doc.Servers = openapi3.Servers{{URL: "/nchf-convergedcharging/v3"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("cannot build router for %s: %w", root, err)
	}
	return &Validator{doc: doc, router: router}, nil
}

// quoteHash matches a quoted scalar directly followed by '#' at the end
// of a line, which YAML 1.2 rejects ("found a comment without preceding
// whitespace"); TS29575_Nadrf_DataManagement.yaml has one. The files stay
// unmodified on disk; the text is fixed in memory.
var quoteHash = regexp.MustCompile(`(?m)(')#\s*$`)

// readLocal reads only local files (the spec set never refers to the
// network) and fixes the one YAML quirk above.
func readLocal(_ *openapi3.Loader, location *url.URL) ([]byte, error) {
	if location.Scheme != "" && location.Scheme != "file" {
		return nil, fmt.Errorf("nchfspec: refusing to read %s: only local files", location)
	}
	b, err := readfile.Read(location.Path, 16<<20)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", location.Path, err)
	}
	return quoteHash.ReplaceAll(b, []byte("$1")), nil
}

// Covers reports whether path is an Nchf_ConvergedCharging path.
func Covers(path string) bool {
	return strings.HasPrefix(path, "/nchf-convergedcharging/v3/")
}

// Validate checks one exchange: the request (method, path, JSON body) and
// the response (status, headers, body). It returns nil when both conform.
func (v *Validator) Validate(method, path string, reqBody []byte, status int, respHeader http.Header, respBody []byte) error {
	ctx := context.Background()
	req, err := http.NewRequest(method, "http://chf.test"+path, bytes.NewReader(reqBody))
	if err != nil {
		return fmt.Errorf("cannot build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no route for %s %s in the spec: %w", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	var errs []error
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		errs = append(errs, fmt.Errorf("request %s %s does not conform: %w", method, path, err))
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 respHeader,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		errs = append(errs, fmt.Errorf("response %d to %s %s does not conform: %w", status, method, path, err))
	}
	return errors.Join(errs...)
}

// ValidateRequest checks only a request (for requests meant to be
// rejected, a test asserts it does NOT conform).
func (v *Validator) ValidateRequest(method, path string, reqBody []byte) error {
	req, err := http.NewRequest(method, "http://chf.test"+path, bytes.NewReader(reqBody))
	if err != nil {
		return fmt.Errorf("cannot build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no route for %s %s in the spec: %w", method, path, err)
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

// ValidateResponseOnly checks a response to a request that itself does
// not conform (malformed-request tests): the response is matched against
// the operation of method and path.
func (v *Validator) ValidateResponseOnly(method, path string, status int, respHeader http.Header, respBody []byte) error {
	req, err := http.NewRequest(method, "http://chf.test"+path, nil)
	if err != nil {
		return fmt.Errorf("cannot build request: %w", err)
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no route for %s %s in the spec: %w", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 respHeader,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

// ValidateNotify checks a ChargingNotify exchange (the chargingNotification
// callback of the create operation): the request body against
// ChargingNotifyRequest, and the status against the callback's responses
// (a 200 body against ChargingNotifyResponse).
func (v *Validator) ValidateNotify(reqBody []byte, status int, respBody []byte) error {
	var errs []error
	if err := v.validateSchema("ChargingNotifyRequest", reqBody); err != nil {
		errs = append(errs, fmt.Errorf("ChargingNotifyRequest: %w", err))
	}
	switch status {
	case 200:
		if err := v.validateSchema("ChargingNotifyResponse", respBody); err != nil {
			errs = append(errs, fmt.Errorf("ChargingNotifyResponse: %w", err))
		}
	case 204, 307, 308, 400, 401, 403, 404, 411, 413, 415, 429, 500, 503:
	default:
		errs = append(errs, fmt.Errorf("status %d is not a chargingNotification callback response", status))
	}
	return errors.Join(errs...)
}

func (v *Validator) validateSchema(name string, body []byte) error {
	ref := v.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("no schema %s in the spec", name)
	}
	var x any
	if err := json.Unmarshal(body, &x); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return ref.Value.VisitJSON(x)
}
