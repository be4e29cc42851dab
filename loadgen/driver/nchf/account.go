package nchf

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/chf-testbed/testbed/loadgen/driver"
)

// Account is a balance as GET /chf/v1/accounts/{supi} returns it.
type Account struct {
	Balance  int64
	Reserved int64
	// Overage is usage reported beyond what the balance covered, in
	// minor units, recorded by the CHF instead of being lost.
	Overage int64
	// Found is false when the CHF answered 404 (no such account).
	Found bool
	// CreditLimit is how far below zero a postpaid balance may go;
	// Offline the running total of offline usage rated (never debited).
	CreditLimit int64
	Offline     int64
	// Buckets are the units the account's live buckets hold, by service
	// (BucketData, BucketVoice, BucketSMS).
	Buckets [NumBucketServices]uint64
}

// Services of Account.Buckets.
const (
	BucketData = iota
	BucketVoice
	BucketSMS
	NumBucketServices
)

// BucketService returns the Account.Buckets index of a service name
// (data, voice, sms), or -1.
func BucketService(name string) int {
	switch name {
	case "data":
		return BucketData
	case "voice":
		return BucketVoice
	case "sms":
		return BucketSMS
	}
	return -1
}

// AccountReader reads balances over one of the driver's transports; it
// is for one goroutine at a time (make one per goroutine).
type AccountReader struct {
	ex exchange
}

// NewAccountReader returns a reader of balances through d.
func (d *Driver) NewAccountReader() *AccountReader {
	return &AccountReader{ex: exchange{d: d}}
}

type accountJSON struct {
	Balance     *int64 `json:"balance"`
	Reserved    int64  `json:"reserved"`
	Overage     int64  `json:"overage"`
	CreditLimit int64  `json:"creditLimit"`
	Offline     int64  `json:"offline"`
	Buckets     []struct {
		Service string `json:"service"`
		Units   uint64 `json:"units"`
	} `json:"buckets"`
}

// ReadAccount reads the balance of supi from target (an index, modulo
// Targets) with GET /chf/v1/accounts/{supi}, bounded by the driver's
// timeout (and ctx), with the driver's operator token
// (driver.Config.OperatorToken) when it has one. A transport failure
// returns an error wrapping driver.ErrTimeout or driver.ErrConnection; a
// 401 one wrapping ErrUnauthorized; another status than 200 and 404 one
// wrapping ErrStatus.
func (r *AccountReader) ReadAccount(ctx context.Context, target int, supi []byte) (Account, error) {
	e := &r.ex
	ctx, cancel := context.WithTimeout(ctx, e.d.timeout)
	defer cancel()
	c := driver.Charge{Op: driver.ChargeBalance, Target: target, SUPI: supi}
	e.d.build(&e.m, &c)
	if err := e.send(ctx, target); err != nil {
		return Account{}, err
	}
	switch e.m.status {
	case http.StatusNotFound:
		return Account{}, nil
	case http.StatusOK:
	case http.StatusUnauthorized:
		if e.d.auth == nil {
			return Account{}, fmt.Errorf("%w: the CGW guards balances with its operator token; give the load generator the same token with --operator-token-file", ErrUnauthorized)
		}
		return Account{}, fmt.Errorf("%w: the CGW refused the operator token sent; --operator-token-file must hold the token of the CGW's --operator-token-file", ErrUnauthorized)
	default:
		return Account{}, fmt.Errorf("%w: status %d for %s", ErrStatus, e.m.status, supi)
	}
	var a accountJSON
	if err := json.Unmarshal(e.m.rbody, &a); err != nil || a.Balance == nil {
		return Account{}, fmt.Errorf("%w: bad account body for %s: %q", ErrStatus, supi, e.m.rbody)
	}
	acc := Account{Balance: *a.Balance, Reserved: a.Reserved, Overage: a.Overage, Found: true, CreditLimit: a.CreditLimit, Offline: a.Offline}
	for _, b := range a.Buckets {
		if k := BucketService(b.Service); k >= 0 {
			acc.Buckets[k] += b.Units
		}
	}
	return acc, nil
}
