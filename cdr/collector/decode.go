// Package collector reads CHF-CDR files as a billing domain's collector
// does, independently of the cdr package's encoder, and applies the
// collector rule that makes every debit count once (Collect). It decodes
// with encoding/asn1 and Go types transcribed
// from TS 32.298 (CHFChargingDataTypes: CHFRecord, ChargingRecord,
// MultipleUnitUsage, UsedUnitContainer; GenericChargingDataTypes:
// SubscriptionID, ManagementExtension, TimeStamp). encoding/asn1 is a
// strict (DER-minded) decoder: it refuses non-minimal lengths and
// integers, so a record it accepts is well-formed BER.
package collector

import (
	"encoding/asn1"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The ASN.1 module is DEFINITIONS IMPLICIT TAGS: every [n] below replaces
// the universal tag, except the open type of ManagementExtension.information.

type chargingRecord struct { // ChargingRecord ::= SET
	RecordType                 int64                      `asn1:"tag:0"`
	RecordingNetworkFunctionID string                     `asn1:"tag:1,utf8"`
	SubscriberIdentifier       subscriptionID             `asn1:"optional,tag:2"`
	NFunctionConsumer          networkFunctionInformation `asn1:"tag:3"`
	Triggers                   asn1.RawValue              `asn1:"optional,tag:4"`
	ListOfMultipleUnitUsage    []multipleUnitUsage        `asn1:"optional,tag:5"`
	RecordOpeningTime          []byte                     `asn1:"tag:6"`
	Duration                   int64                      `asn1:"tag:7"`
	RecordSequenceNumber       int64                      `asn1:"optional,tag:8"`
	CauseForRecClosing         int64                      `asn1:"tag:9"`
	Diagnostics                asn1.RawValue              `asn1:"optional,tag:10"`
	LocalRecordSequenceNumber  int64                      `asn1:"optional,tag:11"`
	RecordExtensions           []managementExtension      `asn1:"optional,tag:12,set"`
	PDUSessionChargingInfo     asn1.RawValue              `asn1:"optional,tag:13"`
	RoamingQBCInformation      asn1.RawValue              `asn1:"optional,tag:14"`
	SMSChargingInformation     asn1.RawValue              `asn1:"optional,tag:15"`
	ChargingSessionIdentifier  []byte                     `asn1:"optional,tag:16"`
}

type subscriptionID struct { // SubscriptionID ::= SET
	Type asn1.Enumerated `asn1:"tag:0"`
	Data string          `asn1:"tag:1,utf8"`
}

type networkFunctionInformation struct {
	Functionality asn1.Enumerated `asn1:"tag:0"`
	Name          string          `asn1:"optional,tag:1,utf8"`
}

type multipleUnitUsage struct {
	RatingGroup        int64               `asn1:"tag:0"`
	UsedUnitContainers []usedUnitContainer `asn1:"optional,tag:1"`
}

type usedUnitContainer struct {
	ServiceIdentifier    int64         `asn1:"optional,tag:0"`
	Time                 int64         `asn1:"optional,tag:1"`
	Triggers             asn1.RawValue `asn1:"optional,tag:2"`
	TriggerTimeStamp     []byte        `asn1:"optional,tag:3"`
	DataTotalVolume      int64         `asn1:"optional,tag:4"`
	DataVolumeUplink     int64         `asn1:"optional,tag:5"`
	DataVolumeDownlink   int64         `asn1:"optional,tag:6"`
	ServiceSpecificUnits int64         `asn1:"optional,tag:7"`
	EventTimeStamp       []byte        `asn1:"optional,tag:8"`
	LocalSequenceNumber  int64         `asn1:"optional,tag:9"`
}

type managementExtension struct {
	Identifier   asn1.ObjectIdentifier
	Significance bool          `asn1:"optional,tag:1"`
	Information  asn1.RawValue `asn1:"explicit,tag:2"`
}

type chargedInformation struct {
	Amount   int64
	Currency string `asn1:"optional,utf8"`
}

// chargedOID is the testbed's record extension for the debit (the cdr
// package's ChargedOID, written out again here); replayOID marks a
// replay record (cdr.ReplayOID).
var (
	chargedOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 32298, 1}
	replayOID  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 32298, 2}
)

type replayInformation struct {
	LocalSequenceNumber int64
}

// Container is one used-unit container.
type Container struct {
	RatingGroup          int64
	Time, Volume, Events int64
	Seq                  int64
	TriggerTime          time.Time
}

// Record is a decoded ChargingRecord.
type Record struct {
	File          string
	RecordType    int64
	Node          string
	SUPI          string // "imsi-..." rebuilt from SubscriptionID
	Functionality int
	Session       string
	Opened        time.Time
	Duration      time.Duration
	Sequence      int64
	Cause         int64
	LocalSequence int64
	Usage         []Container
	Charged       int64
	HasCharged    bool
	Currency      string
	// Replay is set on a replay record: it holds the one request whose
	// invocationSequenceNumber is ReplaySeq (see Collect).
	Replay    bool
	ReplaySeq int64
}

// Decode decodes a concatenation of BER CHFRecords.
func Decode(b []byte) ([]Record, error) {
	var out []Record
	for len(b) > 0 {
		var cr chargingRecord
		rest, err := asn1.UnmarshalWithParams(b, &cr, "tag:200") // chargingFunctionRecord [200]
		if err != nil {
			return out, fmt.Errorf("cannot decode record %d: %w", len(out)+1, err)
		}
		b = rest
		r := Record{RecordType: cr.RecordType, Node: cr.RecordingNetworkFunctionID, Functionality: int(cr.NFunctionConsumer.Functionality),
			Session: string(cr.ChargingSessionIdentifier), Duration: time.Duration(cr.Duration) * time.Second,
			Sequence: cr.RecordSequenceNumber, Cause: cr.CauseForRecClosing, LocalSequence: cr.LocalRecordSequenceNumber}
		switch cr.SubscriberIdentifier.Type {
		case 0:
			r.SUPI = "msisdn-" + cr.SubscriberIdentifier.Data
		case 1:
			r.SUPI = "imsi-" + cr.SubscriberIdentifier.Data
		case 3:
			r.SUPI = "nai-" + cr.SubscriberIdentifier.Data
		default:
			r.SUPI = cr.SubscriberIdentifier.Data
		}
		if r.Opened, err = timeStamp(cr.RecordOpeningTime); err != nil {
			return out, err
		}
		for _, m := range cr.ListOfMultipleUnitUsage {
			for _, c := range m.UsedUnitContainers {
				ct := Container{RatingGroup: m.RatingGroup, Time: c.Time, Volume: c.DataTotalVolume, Events: c.ServiceSpecificUnits, Seq: c.LocalSequenceNumber}
				if len(c.TriggerTimeStamp) > 0 {
					if ct.TriggerTime, err = timeStamp(c.TriggerTimeStamp); err != nil {
						return out, err
					}
				}
				r.Usage = append(r.Usage, ct)
			}
		}
		for _, e := range cr.RecordExtensions {
			switch {
			case e.Identifier.Equal(chargedOID):
				var ci chargedInformation
				if _, err := asn1.Unmarshal(e.Information.Bytes, &ci); err != nil {
					return out, fmt.Errorf("cannot decode the charged extension: %w", err)
				}
				r.Charged, r.Currency, r.HasCharged = ci.Amount, ci.Currency, true
			case e.Identifier.Equal(replayOID):
				var ri replayInformation
				if _, err := asn1.Unmarshal(e.Information.Bytes, &ri); err != nil {
					return out, fmt.Errorf("cannot decode the replay extension: %w", err)
				}
				r.Replay, r.ReplaySeq = true, ri.LocalSequenceNumber
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// timeStamp decodes a TimeStamp (YYMMDDhhmmss BCD, sign, hhmm BCD).
func timeStamp(b []byte) (time.Time, error) {
	if len(b) != 9 || (b[6] != '+' && b[6] != '-') {
		return time.Time{}, fmt.Errorf("cannot decode TimeStamp % x", b)
	}
	d := func(c byte) int { return int(c>>4)*10 + int(c&0xf) }
	off := (d(b[7])*60 + d(b[8])) * 60
	if b[6] == '-' {
		off = -off
	}
	return time.Date(2000+d(b[0]), time.Month(d(b[1])), d(b[2]), d(b[3]), d(b[4]), d(b[5]), 0, time.FixedZone("", off)), nil
}

// DecodeDir decodes every finished file (*.ber) in dir and its
// subdirectories (one per OCP instance under chf local --replicas), in
// path order; an unfinished file (*.ber.open) is an error.
func DecodeDir(dir string) ([]Record, error) {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
		case strings.HasSuffix(d.Name(), ".ber.open"):
			return errors.New("unfinished CDR file " + path)
		case strings.HasSuffix(d.Name(), ".ber"):
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Record
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		rs, err := Decode(b)
		rel, _ := filepath.Rel(dir, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		for i := range rs {
			rs[i].File = rel
		}
		out = append(out, rs...)
	}
	return out, nil
}
