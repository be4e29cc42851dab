// Package record is the ABM's account record as the store holds it: the
// namespace and set, the bin names, the size a session adds, and the
// session blob of a newly provisioned account. It is what provisioning
// (abm/provision) and the load generator's planner share with the ABM
// without linking it; the ABM (package abm) reads and writes the whole
// blob, whose layout its record.go documents.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/chf-testbed/testbed/chf"
	"github.com/chf-testbed/testbed/chf/checked"
)

// DefaultNamespace and Set are where the account records live by default
// (--as-namespace) and always; the key is the SUPI.
const (
	DefaultNamespace = "chf"
	Set              = "accounts"
)

// Bin names of an account record (Aerospike limits them to 15 bytes).
const (
	BinBalance  = "bal"  // int: balance in minor units, reservations not subtracted
	BinCurrency = "cur"  // string: ISO 4217 code
	BinDebited  = "deb"  // int: total debited since provisioning, minor units
	BinSessions = "sess" // blob: overage, sessions, reservations, last answers, recent identities
	// BinEpoch is the tariff epoch the account's open sessions were
	// granted under (int, chf.ApplyRequest.Epoch; absent = unknown),
	// written only when it changes (abm/README.md, Notifications).
	BinEpoch = "te"
	// BinDue is when the sweep next has work on the account (int, Unix
	// seconds), set by every write; absent when nothing will expire. The
	// sweep's scan asks the store for only the records due (abm/README.md,
	// The sweep).
	BinDue = "due"
)

// DueNever is the BinDue of an account on which nothing will expire: no
// reservation, session, answer kept for retries or bucket with a
// validity. Its record has no BinDue.
const DueNever = math.MaxInt64

// BlobVersion is the first byte of every session blob written.
const BlobVersion = 6

// SessionRecordBytes is about what one open session with one rating group
// adds to an account record (abm's TestRecordSizeOpenSessions measures
// it).
const SessionRecordBytes = 56

// NewBlob returns the session blob of a new account and its BinDue: empty
// (DueNever) for a prepaid account without buckets, else a version
// BlobVersion blob holding the credit limit (postpaid when > 0) and the
// buckets, in order (chf.Bucket with Expires a validity in seconds from
// now, 0 = none), and no session. It refuses what a top-up would refuse:
// a negative credit limit, balance + credit limit beyond int64, a bucket
// without a service or units, the units of a service beyond 64 bits in
// total, a validity beyond int64 Unix seconds. The ABM decodes it as any
// blob (abm's TestNewBlobMatchesTheABM).
func NewBlob(balance, creditLimit int64, buckets []chf.Bucket, now int64) ([]byte, int64, error) {
	if creditLimit < 0 {
		return nil, 0, errors.New("abm: provision credit limit must not be negative")
	}
	if _, ok := checked.AddI64(balance, creditLimit); !ok {
		return nil, 0, errors.New("abm: provision balance + credit limit overflows int64 minor units")
	}
	if creditLimit == 0 && len(buckets) == 0 {
		return []byte{}, DueNever, nil
	}
	due := int64(DueNever)
	var totals [chf.ServiceSMS + 1]uint64
	dst := []byte{BlobVersion}
	dst = binary.AppendVarint(dst, 0) // overage
	dst = binary.AppendVarint(dst, creditLimit)
	dst = binary.AppendVarint(dst, 0) // offline
	dst = binary.AppendVarint(dst, 0) // credited
	dst = binary.AppendUvarint(dst, uint64(len(buckets)))
	for i, b := range buckets {
		if b.Service < chf.ServiceData || b.Service > chf.ServiceSMS || b.Units == 0 || b.Expires < 0 {
			return nil, 0, fmt.Errorf("abm: provision bucket %d: want a service, units > 0 and a validity >= 0", i)
		}
		var ok bool
		if totals[b.Service], ok = checked.AddU64(totals[b.Service], b.Units); !ok {
			return nil, 0, fmt.Errorf("abm: provision bucket %d: the units of its service overflow 64 bits in total", i)
		}
		var expires int64
		if b.Expires > 0 {
			if expires, ok = checked.AddSeconds(now, b.Expires); !ok {
				return nil, 0, fmt.Errorf("abm: provision bucket %d: validity %d s from now overflows int64 Unix seconds", i, b.Expires)
			}
			due = min(due, expires)
		}
		dst = append(dst, byte(b.Service))
		dst = binary.AppendUvarint(dst, b.Units)
		dst = binary.AppendVarint(dst, expires)
	}
	dst = append(dst, 0)               // account flags: not barred
	dst = binary.AppendUvarint(dst, 0) // sessions
	dst = binary.AppendUvarint(dst, 0) // recent identities
	return slices.Clip(dst), due, nil
}
