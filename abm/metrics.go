package abm

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
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
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(applied, int64(st.Applied))
		o.ObserveInt64(conflicts, int64(st.Conflicts))
		o.ObserveInt64(expired, int64(st.Expired))
		o.ObserveInt64(hits, int64(st.CacheHits))
		o.ObserveInt64(stale, int64(st.CacheStale))
		o.ObserveInt64(overage, int64(st.Overage))
		return nil
	}, applied, conflicts, expired, hits, stale, overage)
	if err != nil {
		return fmt.Errorf("cannot register abm metrics: %w", err)
	}
	return nil
}
