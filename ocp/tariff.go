package ocp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/chf-testbed/testbed/chf"
)

// ErrInvalidTariff is wrapped by every tariff validation error.
var ErrInvalidTariff = errors.New("ocp: invalid tariff")

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

	service  chf.Service
	unitSize uint64
}

// Tariff maps rating groups to rates. A loaded Tariff is immutable and safe
// for concurrent use.
type Tariff struct {
	RatingGroups []Rate `yaml:"ratingGroups" json:"ratingGroups"`

	byRG map[uint32]*Rate
}

// DefaultTariff is the built-in tariff covering the reference traffic mix:
// RG 10 data at 1 minor unit per MB (grant 10 MB), RG 20 voice at 1 minor
// unit per second (grant 300 s), RG 30 SMS at 5 minor units per message
// (grant 1); validity 1800 s, quota holding time 300 s.
const DefaultTariff = `# CHF testbed default tariff. Prices are integer minor units (cents).
# Cost of N units = ceil(N * price / unit) per rating group per request,
# unit = 1 MB (1,000,000 octets of total volume) for data, 1 s for voice,
# 1 event for sms.
ratingGroups:
  - ratingGroup: 10
    service: data
    price: 1                # per MB
    defaultGrant: 10000000  # octets (10 MB)
    validityTime: 1800
    quotaHoldingTime: 300
  - ratingGroup: 20
    service: voice
    price: 1                # per second
    defaultGrant: 300       # seconds
    validityTime: 1800
    quotaHoldingTime: 300
  - ratingGroup: 30
    service: sms
    price: 5                # per message
    defaultGrant: 1         # events
    validityTime: 1800
    quotaHoldingTime: 300
`

// Default returns the built-in tariff.
func Default() *Tariff {
	t, err := ParseTariff([]byte(DefaultTariff))
	if err != nil {
		panic("BUG: default tariff invalid: " + err.Error())
	}
	return t
}

// LoadTariff reads and validates a YAML or JSON tariff file. An empty path
// returns the default tariff.
func LoadTariff(path string) (*Tariff, error) {
	if path == "" {
		return Default(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read tariff: %w", err)
	}
	t, err := ParseTariff(b)
	if err != nil {
		return nil, fmt.Errorf("cannot load tariff %s: %w", path, err)
	}
	return t, nil
}

// ParseTariff decodes a YAML or JSON (a subset of YAML) tariff, rejecting
// unknown fields, and validates it. Errors name the offending field, e.g.
// "ratingGroups[1].price".
func ParseTariff(b []byte) (*Tariff, error) {
	var t Tariff
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%w: cannot decode: %w", ErrInvalidTariff, err)
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

func fieldError(i int, field, format string, args ...any) error {
	return fmt.Errorf("%w: ratingGroups[%d].%s: %s", ErrInvalidTariff, i, field, fmt.Sprintf(format, args...))
}

// validate checks every rate and builds the lookup index.
func (t *Tariff) validate() error {
	if len(t.RatingGroups) == 0 {
		return fmt.Errorf("%w: ratingGroups: at least one rating group is required", ErrInvalidTariff)
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
		t.byRG[r.RatingGroup] = r
	}
	return nil
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
