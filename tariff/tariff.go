// Package tariff is the tariff file: its format (YAML or JSON), the
// built-in default, parsing and validation, and the compiled per-rating-
// group rate the OCP rates with. The OCP (package ocp) rates on it; the
// load generator's audit (loadgen/audit) reads the same file through it
// but rates on its own (it must not use Rate.Cost, Rate.Grant or
// Rate.Arm: an independent check shares the format, not the rating).
package tariff

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/internal/readfile"
)

// ErrInvalid is wrapped by every tariff validation error.
var ErrInvalid = errors.New("tariff: invalid tariff")

// MB is the data price unit: a megabyte of total volume, in octets.
const MB = 1_000_000

// Rate is the tariff of one rating group. Prices are integer minor units of
// the account's currency. The cost of N base units (octets, seconds,
// events) is ceil(N * Price / UnitSize), computed per rating group per
// request (chf.Cost), where UnitSize is MB for data and 1 otherwise.
type Rate struct {
	RatingGroup uint32 `yaml:"ratingGroup" json:"ratingGroup"`
	// Service is "data", "voice" or "sms".
	Service string `yaml:"service" json:"service"`
	// Price is minor units per MB (data), per second (voice) or per event
	// (sms). Zero rates for free.
	Price int64 `yaml:"price" json:"price"`
	// DefaultGrant is the grant, in base units (octets, seconds, events),
	// when the client asks for quota without naming an amount.
	DefaultGrant uint64 `yaml:"defaultGrant" json:"defaultGrant"`
	// MaxGrant caps a requested amount (base units); 0 means no cap.
	MaxGrant uint64 `yaml:"maxGrant,omitempty" json:"maxGrant,omitempty"`
	// ValidityTime (seconds) is answered with each grant; the ABM holds the
	// reservation that long. QuotaHoldingTime (seconds) is answered too.
	ValidityTime     int64 `yaml:"validityTime" json:"validityTime"`
	QuotaHoldingTime int64 `yaml:"quotaHoldingTime" json:"quotaHoldingTime"`
	// QuotaThreshold (base units) is answered with each grant as its
	// volume/time/unitQuotaThreshold: the client reports when the unused
	// part of the grant falls to it. 0 = none; below the grant.
	QuotaThreshold uint64 `yaml:"quotaThreshold,omitempty" json:"quotaThreshold,omitempty"`
	// Triggers are armed with each grant (Nchf triggers, category
	// IMMEDIATE_REPORT): QUOTA_THRESHOLD (needs quotaThreshold), QHT,
	// QUOTA_EXHAUSTED, VALIDITY_TIME, FINAL, FORCED_REAUTHORISATION.
	Triggers []string `yaml:"triggers,omitempty" json:"triggers,omitempty"`
	// FinalUnitAction is what a final grant tells the client to do when it
	// is used: TERMINATE (default), REDIRECT (to RedirectServer) or
	// RESTRICT_ACCESS (FilterID applied).
	FinalUnitAction string `yaml:"finalUnitAction,omitempty" json:"finalUnitAction,omitempty"`
	// RedirectServer is the address REDIRECT sends the user to: a URL
	// ("http://top-up.example/"), an IPv4 or IPv6 address, or a SIP URI.
	RedirectServer string `yaml:"redirectServer,omitempty" json:"redirectServer,omitempty"`
	// FilterID names the filter RESTRICT_ACCESS applies (Nchf filterId,
	// Gy Filter-Id).
	FilterID string `yaml:"filterId,omitempty" json:"filterId,omitempty"`

	service      chf.Service
	unitSize     uint64
	triggers     chf.Triggers
	finalAction  chf.FinalAction
	redirectType chf.RedirectType
}

// Tariff maps rating groups to rates. A loaded Tariff is immutable and safe
// for concurrent use.
type Tariff struct {
	RatingGroups []Rate `yaml:"ratingGroups" json:"ratingGroups"`

	byRG  map[uint32]*Rate
	epoch uint32
}

// Epoch identifies what t rates: a digest (FNV-1a, never 0) of every
// rate's fields in rating-group order, so the same tariff has the same
// epoch in every OCP and across restarts, and any change of a rate
// changes it. It is carried on every rated request to the ABM
// (chf.ApplyRequest.Epoch), whose sweep re-authorises the sessions
// granted under another one.
func (t *Tariff) Epoch() uint32 { return t.epoch }

// Changed returns the rating groups whose rate differs between old and t
// (added, removed or changed), in ascending order.
func (t *Tariff) Changed(old *Tariff) []uint32 {
	var out []uint32
	for rg, r := range t.byRG {
		if o := old.byRG[rg]; o == nil || o.digest(chf.HashSeed) != r.digest(chf.HashSeed) {
			out = append(out, rg)
		}
	}
	for rg := range old.byRG {
		if t.byRG[rg] == nil {
			out = append(out, rg)
		}
	}
	slices.Sort(out)
	return out
}

// digest folds every field of r into h.
func (r *Rate) digest(h uint64) uint64 {
	h = chf.HashUint(h, uint64(r.RatingGroup))
	h = chf.HashUint(h, uint64(r.service))
	h = chf.HashUint(h, uint64(r.Price))
	h = chf.HashUint(h, r.DefaultGrant)
	h = chf.HashUint(h, r.MaxGrant)
	h = chf.HashUint(h, uint64(r.ValidityTime))
	h = chf.HashUint(h, uint64(r.QuotaHoldingTime))
	h = chf.HashUint(h, r.QuotaThreshold)
	h = chf.HashUint(h, uint64(r.triggers))
	h = chf.HashUint(h, uint64(r.finalAction))
	h = chf.HashString(h, r.RedirectServer)
	return chf.HashString(chf.HashUint(h, 0), r.FilterID)
}

// DefaultFile is the built-in tariff covering the reference traffic mix:
// RG 10 data at 1 minor unit per MB (grant 10 MB, at most 100 MB,
// threshold 2 MB), RG 20 voice at 1 minor unit per second (grant 300 s,
// at most 3600 s, threshold 60 s), RG 30 SMS at 5 minor units per message
// (grant 1, at most 10); validity 1800 s, quota holding time 300 s; data
// and voice grants arm QUOTA_THRESHOLD, QUOTA_EXHAUSTED and
// VALIDITY_TIME; final grants TERMINATE. The caps keep one request from
// reserving a whole balance.
const DefaultFile = `# CHF testbed default tariff. Prices are integer minor units (cents).
# Cost of N units = ceil(N * price / unit) per rating group per request,
# unit = 1 MB (1,000,000 octets of total volume) for data, 1 s for voice,
# 1 event for sms.
ratingGroups:
  - ratingGroup: 10
    service: data
    price: 1                # per MB
    defaultGrant: 10000000  # octets (10 MB)
    maxGrant: 100000000     # octets (100 MB): a larger request is capped
    validityTime: 1800
    quotaHoldingTime: 300
    quotaThreshold: 2000000 # report when 2 MB of a grant are left
    triggers: [QUOTA_THRESHOLD, QUOTA_EXHAUSTED, VALIDITY_TIME]
  - ratingGroup: 20
    service: voice
    price: 1                # per second
    defaultGrant: 300       # seconds
    maxGrant: 3600          # seconds: a larger request is capped
    validityTime: 1800
    quotaHoldingTime: 300
    quotaThreshold: 60      # report when 60 s of a grant are left
    triggers: [QUOTA_THRESHOLD, QUOTA_EXHAUSTED, VALIDITY_TIME]
  - ratingGroup: 30
    service: sms
    price: 5                # per message
    defaultGrant: 1         # events
    maxGrant: 10            # events an immediate event may request
    validityTime: 1800
    quotaHoldingTime: 300
`

// Default returns the built-in tariff.
func Default() *Tariff {
	t, err := Parse([]byte(DefaultFile))
	if err != nil {
		panic("BUG: default tariff invalid: " + err.Error())
	}
	return t
}

// MaxFileBytes is the largest tariff file Load (and loadgen's --tariff,
// --tariff-change) reads.
const MaxFileBytes = 16 << 20

// Load reads and validates a YAML or JSON tariff file. An empty path
// returns the default tariff.
func Load(path string) (*Tariff, error) {
	if path == "" {
		return Default(), nil
	}
	b, err := readfile.Read(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("cannot read tariff: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("cannot load tariff %s: %w", path, err)
	}
	return t, nil
}

// Parse decodes a YAML or JSON (a subset of YAML) tariff, rejecting
// unknown fields, and validates it. Errors name the offending field, e.g.
// "ratingGroups[1].price".
func Parse(b []byte) (*Tariff, error) {
	var t Tariff
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%w: cannot decode: %w", ErrInvalid, err)
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

func fieldError(i int, field, format string, args ...any) error {
	return fmt.Errorf("%w: ratingGroups[%d].%s: %s", ErrInvalid, i, field, fmt.Sprintf(format, args...))
}

// validate checks every rate and builds the lookup index.
func (t *Tariff) validate() error {
	if len(t.RatingGroups) == 0 {
		return fmt.Errorf("%w: ratingGroups: at least one rating group is required", ErrInvalid)
	}
	t.byRG = make(map[uint32]*Rate, len(t.RatingGroups))
	for i := range t.RatingGroups {
		r := &t.RatingGroups[i]
		if _, dup := t.byRG[r.RatingGroup]; dup {
			return fieldError(i, "ratingGroup", "duplicate rating group %d", r.RatingGroup)
		}
		switch strings.ToLower(r.Service) {
		case "data":
			r.service, r.unitSize = chf.ServiceData, MB
		case "voice":
			r.service, r.unitSize = chf.ServiceVoice, 1
		case "sms":
			r.service, r.unitSize = chf.ServiceSMS, 1
		case "":
			return fieldError(i, "service", "missing (data, voice or sms)")
		default:
			return fieldError(i, "service", "unknown service %q (want data, voice or sms)", r.Service)
		}
		if r.Price < 0 {
			return fieldError(i, "price", "must not be negative (got %d)", r.Price)
		}
		if r.DefaultGrant == 0 {
			return fieldError(i, "defaultGrant", "must be positive")
		}
		if r.service == chf.ServiceVoice && r.DefaultGrant > math.MaxUint32 {
			return fieldError(i, "defaultGrant", "%d seconds exceeds 32 bits", r.DefaultGrant)
		}
		if r.MaxGrant != 0 && r.MaxGrant < r.DefaultGrant {
			return fieldError(i, "maxGrant", "%d is below defaultGrant %d", r.MaxGrant, r.DefaultGrant)
		}
		if r.ValidityTime < 0 || r.ValidityTime > math.MaxUint32 {
			return fieldError(i, "validityTime", "must be 0..%d seconds (got %d)", uint32(math.MaxUint32), r.ValidityTime)
		}
		if r.QuotaHoldingTime < 0 || r.QuotaHoldingTime > math.MaxUint32 {
			return fieldError(i, "quotaHoldingTime", "must be 0..%d seconds (got %d)", uint32(math.MaxUint32), r.QuotaHoldingTime)
		}
		if err := r.validateTriggers(i); err != nil {
			return err
		}
		t.byRG[r.RatingGroup] = r
	}
	rgs := make([]uint32, 0, len(t.byRG))
	for rg := range t.byRG {
		rgs = append(rgs, rg)
	}
	slices.Sort(rgs)
	h := chf.HashSeed
	for _, rg := range rgs {
		h = t.byRG[rg].digest(h)
	}
	if t.epoch = uint32(h ^ h>>32); t.epoch == 0 {
		t.epoch = 1
	}
	return nil
}

// validateTriggers checks the threshold, triggers and final unit action of
// rate i and compiles them.
func (r *Rate) validateTriggers(i int) error {
	if r.QuotaThreshold >= r.DefaultGrant {
		if r.QuotaThreshold != 0 {
			return fieldError(i, "quotaThreshold", "%d must be below defaultGrant %d", r.QuotaThreshold, r.DefaultGrant)
		}
	}
	if r.service == chf.ServiceSMS && (r.QuotaThreshold != 0 || len(r.Triggers) != 0) {
		return fieldError(i, "triggers", "an sms (event) rate has no grants to arm triggers on")
	}
	if r.QuotaThreshold > math.MaxUint32 && r.service != chf.ServiceData {
		return fieldError(i, "quotaThreshold", "%d exceeds 32 bits", r.QuotaThreshold)
	}
	r.triggers = 0
	for j, name := range r.Triggers {
		t := chf.ParseTrigger([]byte(name))
		if t == chf.TriggerOther {
			return fieldError(i, fmt.Sprintf("triggers[%d]", j), "unknown trigger %q (want QUOTA_THRESHOLD, QHT, QUOTA_EXHAUSTED, VALIDITY_TIME, FINAL or FORCED_REAUTHORISATION)", name)
		}
		if r.triggers&t != 0 {
			return fieldError(i, fmt.Sprintf("triggers[%d]", j), "%s named twice", name)
		}
		r.triggers |= t
	}
	if r.triggers&chf.TriggerQuotaThreshold != 0 && r.QuotaThreshold == 0 {
		return fieldError(i, "quotaThreshold", "required with trigger QUOTA_THRESHOLD")
	}
	switch r.FinalUnitAction {
	case "", "TERMINATE":
		r.finalAction = chf.FinalTerminate
	case "REDIRECT":
		r.finalAction = chf.FinalRedirect
		t, ok := redirectType(r.RedirectServer)
		if !ok {
			return fieldError(i, "redirectServer", "REDIRECT needs a URL, an IPv4 or IPv6 address or a sip: URI (got %q)", r.RedirectServer)
		}
		r.redirectType = t
	case "RESTRICT_ACCESS":
		r.finalAction = chf.FinalRestrictAccess
		if r.FilterID == "" {
			return fieldError(i, "filterId", "required with RESTRICT_ACCESS")
		}
	default:
		return fieldError(i, "finalUnitAction", "unknown action %q (want TERMINATE, REDIRECT or RESTRICT_ACCESS)", r.FinalUnitAction)
	}
	if r.finalAction != chf.FinalRedirect && r.RedirectServer != "" {
		return fieldError(i, "redirectServer", "only with finalUnitAction REDIRECT")
	}
	if r.finalAction != chf.FinalRestrictAccess && r.FilterID != "" {
		return fieldError(i, "filterId", "only with finalUnitAction RESTRICT_ACCESS")
	}
	return nil
}

// redirectType classifies a redirect server address.
func redirectType(addr string) (chf.RedirectType, bool) {
	if ip, err := netip.ParseAddr(addr); err == nil {
		if ip.Is4() {
			return chf.RedirectIPv4, true
		}
		return chf.RedirectIPv6, true
	}
	if strings.HasPrefix(addr, "sip:") || strings.HasPrefix(addr, "sips:") {
		return chf.RedirectURI, true
	}
	if u, err := url.Parse(addr); err == nil && u.Scheme != "" && u.Host != "" {
		return chf.RedirectURL, true
	}
	return 0, false
}

// Arm fills g's threshold, triggers and final unit action from the rate:
// what the grant tells the client beyond its units.
func (r *Rate) Arm(g *chf.GrantLine) {
	if g.Result == chf.ResultSuccess && !g.Granted.IsZero() {
		g.Triggers = r.triggers
		if r.QuotaThreshold < g.Granted.Amount(r.service) {
			// A grant at or below the threshold (a final, shrunk one)
			// is reported on exhaustion instead.
			g.Threshold = r.QuotaThreshold
		}
	}
	if g.FinalUnit {
		g.FinalAction, g.RedirectType = r.finalAction, r.redirectType
		g.Redirect, g.FilterID = r.RedirectServer, r.FilterID
	}
}

// Rate returns the rate of a rating group, or nil when the tariff has none.
func (t *Tariff) Rate(rg uint32) *Rate { return t.byRG[rg] }

// ServiceOf returns the chf.Service the rate charges for.
func (r *Rate) ServiceOf() chf.Service { return r.service }

// UnitSize returns the number of base units the price is per.
func (r *Rate) UnitSize() uint64 { return r.unitSize }

// Cost returns the price of n base units on this rate.
func (r *Rate) Cost(n uint64) int64 { return chf.Cost(n, r.Price, r.unitSize) }

// Grant returns the base units to grant for a request of requested units
// (0 = the default grant), capped by MaxGrant.
func (r *Rate) Grant(requested uint64) uint64 {
	if requested == 0 {
		return r.DefaultGrant
	}
	if r.MaxGrant != 0 && requested > r.MaxGrant {
		return r.MaxGrant
	}
	return requested
}

// Marshal encodes t's rating groups as a tariff file (YAML) that Parse
// reads back to the same rates. t need not have been parsed: a tariff
// built as a value (Tariff{RatingGroups: rates}) is encoded as given, and
// Parse is what validates it.
func (t *Tariff) Marshal() ([]byte, error) {
	b, err := yaml.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("cannot marshal tariff: %w", err)
	}
	return b, nil
}
