package abm

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	as "github.com/aerospike/aerospike-client-go/v7"
	"github.com/aerospike/aerospike-client-go/v7/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/chf-testbed/testbed/chassis/flight"
	"github.com/chf-testbed/testbed/chassis/telemetry"
)

// RegisterMetrics exports the service's counters on m (the chassis meter,
// served on /metrics): events applied, generation conflicts retried and
// accounts whose expired reservations the sweep released.
func (s *Service) RegisterMetrics(m metric.Meter) error {
	applied, err := m.Int64ObservableCounter("abm_events_applied", metric.WithDescription("charging events applied to account records"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	conflicts, err := m.Int64ObservableCounter("abm_generation_conflicts", metric.WithDescription("read-modify-writes retried because the account record changed"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	expired, err := m.Int64ObservableCounter("abm_sweep_released_accounts", metric.WithDescription("accounts whose expired reservations the sweep released"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	hits, err := m.Int64ObservableCounter("abm_account_cache_hits", metric.WithDescription("charging events written without a read, from the account cache"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	stale, err := m.Int64ObservableCounter("abm_account_cache_stale", metric.WithDescription("charging events whose cached account state was outdated (then re-read)"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	overage, err := m.Int64ObservableCounter("abm_overage_minor_units", metric.WithDescription("usage rated beyond what the balance could pay, recorded on the accounts as overage (minor units)"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	inDoubt, err := m.Int64ObservableCounter("abm_writes_in_doubt", metric.WithDescription("account writes sent whose answer was lost, by what the re-read of the record told (outcome landed, lost, unknown)"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	replays, err := m.Int64ObservableCounter("abm_replays", metric.WithDescription("answers repeating one already given (a retransmission or a retry with the same identity): the first answer with its charge, nothing charged again"))
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	if err := s.registerSweepMetrics(m); err != nil {
		return err
	}
	landed := metric.WithAttributes(attribute.String("outcome", "landed"))
	lost := metric.WithAttributes(attribute.String("outcome", "lost"))
	unknown := metric.WithAttributes(attribute.String("outcome", "unknown"))
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(applied, int64(st.Applied))
		o.ObserveInt64(conflicts, int64(st.Conflicts))
		o.ObserveInt64(expired, int64(st.Expired))
		o.ObserveInt64(hits, int64(st.CacheHits))
		o.ObserveInt64(stale, int64(st.CacheStale))
		o.ObserveInt64(overage, int64(st.Overage))
		o.ObserveInt64(inDoubt, int64(st.InDoubtLanded), landed)
		o.ObserveInt64(inDoubt, int64(st.InDoubtLost), lost)
		o.ObserveInt64(inDoubt, int64(st.InDoubtLeft), unknown)
		o.ObserveInt64(replays, int64(st.Replays))
		return nil
	}, applied, conflicts, expired, hits, stale, overage, inDoubt, replays)
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	return nil
}

// registerSweepMetrics exports the sweep's progress and the
// re-authorisations it queued.
func (s *Service) registerSweepMetrics(m metric.Meter) error {
	fail := func(err error) error { return fmt.Errorf("cannot register abm sweep metrics: %w", err) }
	scanned, err := m.Int64ObservableCounter("abm_sweep_records_scanned", metric.WithDescription("account records the reservation sweep read: those the store returned as due (BinDue)"))
	if err != nil {
		return fail(err)
	}
	passes, err := m.Int64ObservableCounter("abm_sweep_passes", metric.WithDescription("reservation sweep passes ended"))
	if err != nil {
		return fail(err)
	}
	last, err := m.Float64ObservableGauge("abm_sweep_last_pass_seconds", metric.WithDescription("duration of the last reservation sweep pass"))
	if err != nil {
		return fail(err)
	}
	rate, err := m.Float64ObservableGauge("abm_sweep_rate_cap", metric.WithDescription("most records per second the sweep reads, and the store examines for it (--sweep-rate; 0 = no cap)"))
	if err != nil {
		return fail(err)
	}
	accounts, err := m.Int64ObservableGauge("abm_sweep_accounts", metric.WithDescription("account records stored when the last capped sweep pass began: the store examines them all, spread over at least accounts / abm_sweep_rate_cap seconds"))
	if err != nil {
		return fail(err)
	}
	queued, err := m.Int64ObservableCounter("abm_notifications_queued", metric.WithDescription("re-authorisations the sweep queued for the CGWs, by reason (tariff: granted under an older tariff; bucket: holding units of an expired bucket)"))
	if err != nil {
		return fail(err)
	}
	dropped, err := m.Int64ObservableCounter("abm_notifications_dropped", metric.WithDescription("re-authorisations not sent by the ABM, by why (full: the queue was full; stale: nobody took them within 5 min)"))
	if err != nil {
		return fail(err)
	}
	taken, err := m.Int64ObservableCounter("abm_notifications_taken", metric.WithDescription("re-authorisations the CGWs took (chf.OpNotifications)"))
	if err != nil {
		return fail(err)
	}
	pending, err := m.Int64ObservableGauge("abm_notifications_pending", metric.WithDescription("re-authorisations queued, not yet taken"))
	if err != nil {
		return fail(err)
	}
	var reasons [nReasons]metric.ObserveOption
	for i, n := range reasonNames {
		reasons[i] = metric.WithAttributes(attribute.String("reason", n))
	}
	full := metric.WithAttributes(attribute.String("why", "full"))
	stale := metric.WithAttributes(attribute.String("why", "stale"))
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		q := s.notes
		o.ObserveInt64(scanned, int64(s.sweep.scanned.Load()))
		o.ObserveInt64(passes, int64(s.sweep.passes.Load()))
		o.ObserveFloat64(last, time.Duration(s.sweep.lastNs.Load()).Seconds())
		o.ObserveFloat64(rate, math.Float64frombits(s.sweep.rate.Load()))
		o.ObserveInt64(accounts, s.sweep.accounts.Load())
		for i := range reasons {
			o.ObserveInt64(queued, int64(q.queued[i].Load()), reasons[i])
		}
		o.ObserveInt64(dropped, int64(q.dropped.Load()), full)
		o.ObserveInt64(dropped, int64(q.stale.Load()), stale)
		o.ObserveInt64(taken, int64(q.taken.Load()))
		o.ObserveInt64(pending, int64(len(q.ch)))
		return nil
	}, scanned, passes, last, rate, accounts, queued, dropped, taken, pending)
	if err != nil {
		return fail(err)
	}
	return nil
}

// The Aerospike calls of the charging path, recorded per call (no
// allocation, no lock):
//
//	chf_abm_aerospike_duration_seconds{operation,result}  histogram
//	chf_abm_aerospike_batch_size{operation}  histogram (records per batch command)
//
// operation is get, put, batch_get or batch_operate; result is ok,
// key_not_found, generation_error, timeout or error.
type asOp uint8

const (
	asGet asOp = iota
	asPut
	asBatchGet
	asBatchOperate
	numASOps
)

var asOpNames = [numASOps]string{"get", "put", "batch_get", "batch_operate"}

const (
	asOK = iota
	asNotFound
	asGeneration
	asTimeout
	asError
	numASResults
)

var asResultNames = [numASResults]string{"ok", "key_not_found", "generation_error", "timeout", "error"}

var (
	asLatencyVec = telemetry.NewHistogramVec("chf_abm_aerospike_duration_seconds",
		"Aerospike calls of the ABM's charging path, by operation and result.", nil, "operation", "result")
	asBatchVec = telemetry.NewHistogramVec("chf_abm_aerospike_batch_size",
		"Records per Aerospike batch command of the ABM, by operation.", telemetry.SizeBuckets, "operation")
	asOnce    sync.Once
	asLatency [numASOps][numASResults]prometheus.Observer
	asBatch   [numASOps]prometheus.Observer
)

// resolveASMetrics resolves every child once, when the first Service is
// made: a process that runs no ABM exports none of them.
func resolveASMetrics() {
	asOnce.Do(func() {
		for op := range asLatency {
			for r := range asLatency[op] {
				asLatency[op][r] = asLatencyVec.WithLabelValues(asOpNames[op], asResultNames[r])
			}
			asBatch[op] = asBatchVec.WithLabelValues(asOpNames[op])
		}
	})
}

// observeAS records one Aerospike call of op begun at start that
// returned err.
func observeAS(op asOp, err as.Error, start time.Time) {
	r := asOK
	switch {
	case err == nil:
	case err.Matches(types.KEY_NOT_FOUND_ERROR):
		r = asNotFound
	case err.Matches(types.GENERATION_ERROR):
		r = asGeneration
	case err.Matches(types.TIMEOUT):
		r = asTimeout
	default:
		r = asError
	}
	d := time.Since(start)
	asLatency[op][r].Observe(d.Seconds())
	flight.Observe(d)
}
