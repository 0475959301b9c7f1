package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Leases coordinate the instances that share one database (docs/scale-out.md):
// a lease is something exactly one instance may do at a time, such as
// coordinating the gradient experiment on one element. Both backends implement
// it; a Store from Open satisfies Leases.
//
// Times are the caller's Unix milliseconds: holders renew well before expiry,
// so clocks need agree only to a fraction of the lease's length.
type Leases interface {
	// AcquireLeases takes every name for group and owner until expiresMs, all
	// or none, in one transaction serialised against every other acquisition.
	// It fails with ErrLeaseHeld when another owner holds a live lease on one
	// of the names, and with ErrLeaseLimit when maxGroups > 0 groups hold live
	// leases already. Expired leases are removed first.
	AcquireLeases(ctx context.Context, names []string, group, owner string, payload []byte, nowMs, expiresMs int64, maxGroups int) error
	// RenewLeases extends group's leases held by owner to expiresMs; it fails
	// with ErrLeaseLost unless every one of them is still held by owner.
	RenewLeases(ctx context.Context, group, owner string, nowMs, expiresMs int64) error
	// ReleaseLeases drops group's leases held by owner and the samples handed
	// to it.
	ReleaseLeases(ctx context.Context, group, owner string) error
	// LiveLeases lists the leases that have not expired at nowMs, by name.
	LiveLeases(ctx context.Context, nowMs int64) ([]Lease, error)
	// PutLeaseSamples hands a batch of samples to group's holder; seq numbers
	// shard's batches, so the holder can tell a repeat.
	PutLeaseSamples(ctx context.Context, group, shard string, seq int64, payload []byte) error
	// TakeLeaseSamples returns and deletes every batch handed to group, in
	// shard and seq order.
	TakeLeaseSamples(ctx context.Context, group string) ([]LeaseSamples, error)
}

// Lease is one held lease.
type Lease struct {
	Name, Group, Owner string
	Payload            []byte
	ExpiresMs          int64
}

// LeaseSamples is one batch handed to a lease holder.
type LeaseSamples struct {
	Shard   string
	Seq     int64
	Payload []byte
}

var (
	// ErrLeaseHeld is wrapped when another owner holds a requested lease.
	ErrLeaseHeld = errors.New("lease held by another owner")
	// ErrLeaseLimit is wrapped when maxGroups groups hold leases already.
	ErrLeaseLimit = errors.New("lease limit reached")
	// ErrLeaseLost is wrapped when a holder's lease expired and was taken,
	// or was released.
	ErrLeaseLost = errors.New("lease lost")
)

// pgLeaseLock serialises lease acquisitions on PostgreSQL (SQLite's
// writer transactions are serialised already: BEGIN IMMEDIATE).
const pgLeaseLock int64 = 0x7473206c65617365 // "ts lease"

func checkIdentity(what, v string, empty bool) error {
	if v == "" && !empty {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	}
	if len(v) > maxIdentityBytes || strings.ContainsRune(v, 0) {
		return fmt.Errorf("%w: %s: longer than %d bytes or holds NUL", ErrInvalid, what, maxIdentityBytes)
	}
	return nil
}

func (s *sqlStore) AcquireLeases(ctx context.Context, names []string, group, owner string, payload []byte, nowMs, expiresMs int64, maxGroups int) error {
	if len(names) == 0 {
		return fmt.Errorf("store %s: acquire leases: %w: no names", s.desc, ErrInvalid)
	}
	for _, n := range names {
		if err := checkIdentity("lease name", n, false); err != nil {
			return fmt.Errorf("store %s: acquire leases: %w", s.desc, err)
		}
	}
	for what, v := range map[string]string{"lease group": group, "lease owner": owner} {
		if err := checkIdentity(what, v, false); err != nil {
			return fmt.Errorf("store %s: acquire leases: %w", s.desc, err)
		}
	}
	if payload == nil {
		payload = []byte{}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(ctx, "acquire leases", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if s.d.name() == "postgres" {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1::int8)`, pgLeaseLock); err != nil {
			return s.wrap(ctx, "acquire leases", err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM leases WHERE expires_ms <= $1`), nowMs); err != nil {
		return s.wrap(ctx, "acquire leases", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, grp, owner FROM leases`)
	if err != nil {
		return s.wrap(ctx, "acquire leases", err)
	}
	groups := map[string]bool{}
	var held error
	for rows.Next() {
		var name, grp, own string
		if err := rows.Scan(&name, &grp, &own); err != nil {
			rows.Close()
			return s.wrap(ctx, "acquire leases", err)
		}
		groups[grp] = true
		if slices.Contains(names, name) && (own != owner || grp != group) && held == nil {
			held = fmt.Errorf("%w: %q is held by %s (%s)", ErrLeaseHeld, name, own, grp)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.wrap(ctx, "acquire leases", err)
	}
	if held != nil {
		return fmt.Errorf("store %s: acquire leases: %w", s.desc, held)
	}
	if maxGroups > 0 && !groups[group] && len(groups) >= maxGroups {
		return fmt.Errorf("store %s: acquire leases: %w: %d group(s) hold leases", s.desc, ErrLeaseLimit, len(groups))
	}
	ins := s.d.rebind(`INSERT INTO leases (name, grp, owner, payload, expires_ms) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET expires_ms = EXCLUDED.expires_ms, payload = EXCLUDED.payload`)
	for _, n := range names {
		if _, err := tx.ExecContext(ctx, ins, n, group, owner, payload, expiresMs); err != nil {
			return s.wrap(ctx, "acquire leases", err)
		}
	}
	return s.wrap(ctx, "acquire leases", tx.Commit())
}

func (s *sqlStore) RenewLeases(ctx context.Context, group, owner string, nowMs, expiresMs int64) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(ctx, "renew leases", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	var total, mine int64
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN expires_ms > $3 THEN 1 ELSE 0 END), 0)
		FROM leases WHERE grp = $1 AND owner = $2`), group, owner, nowMs).Scan(&total, &mine); err != nil {
		return s.wrap(ctx, "renew leases", err)
	}
	// An expired lease may be taken by another owner at any moment: only a
	// lease still live is renewed, so two owners never both hold it.
	if total == 0 || mine != total {
		return fmt.Errorf("store %s: renew leases of %s: %w", s.desc, group, ErrLeaseLost)
	}
	res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE leases SET expires_ms = $3 WHERE grp = $1 AND owner = $2`), group, owner, expiresMs)
	if err != nil {
		return s.wrap(ctx, "renew leases", err)
	}
	// An acquisition that found the leases expired may have deleted them
	// since they were counted.
	if n, err := res.RowsAffected(); err != nil {
		return s.wrap(ctx, "renew leases", err)
	} else if n != total {
		return fmt.Errorf("store %s: renew leases of %s: %w", s.desc, group, ErrLeaseLost)
	}
	return s.wrap(ctx, "renew leases", tx.Commit())
}

func (s *sqlStore) ReleaseLeases(ctx context.Context, group, owner string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(ctx, "release leases", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM leases WHERE grp = $1 AND owner = $2`), group, owner); err != nil {
		return s.wrap(ctx, "release leases", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM lease_samples WHERE grp = $1`), group); err != nil {
		return s.wrap(ctx, "release leases", err)
	}
	return s.wrap(ctx, "release leases", tx.Commit())
}

func (s *sqlStore) LiveLeases(ctx context.Context, nowMs int64) ([]Lease, error) {
	rows, err := s.r.QueryContext(ctx, s.d.rebind(`SELECT name, grp, owner, payload, expires_ms FROM leases WHERE expires_ms > $1 ORDER BY name`), nowMs)
	if err != nil {
		return nil, s.wrap(ctx, "live leases", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		if err := rows.Scan(&l.Name, &l.Group, &l.Owner, &l.Payload, &l.ExpiresMs); err != nil {
			return nil, s.wrap(ctx, "live leases", err)
		}
		out = append(out, l)
	}
	return out, s.wrap(ctx, "live leases", rows.Err())
}

func (s *sqlStore) PutLeaseSamples(ctx context.Context, group, shard string, seq int64, payload []byte) error {
	if err := errors.Join(checkIdentity("group", group, false), checkIdentity("shard", shard, false)); err != nil {
		return fmt.Errorf("store %s: put lease samples: %w", s.desc, err)
	}
	if payload == nil {
		payload = []byte{}
	}
	_, err := s.w.ExecContext(ctx, s.d.rebind(`INSERT INTO lease_samples (grp, shard, seq, payload) VALUES ($1, $2, $3, $4)
		ON CONFLICT (grp, shard, seq) DO NOTHING`), group, shard, seq, payload)
	return s.wrap(ctx, "put lease samples", err)
}

func (s *sqlStore) TakeLeaseSamples(ctx context.Context, group string) ([]LeaseSamples, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.wrap(ctx, "take lease samples", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	rows, err := tx.QueryContext(ctx, s.d.rebind(`DELETE FROM lease_samples WHERE grp = $1 RETURNING shard, seq, payload`), group)
	if err != nil {
		return nil, s.wrap(ctx, "take lease samples", err)
	}
	var out []LeaseSamples
	for rows.Next() {
		var b LeaseSamples
		if err := rows.Scan(&b.Shard, &b.Seq, &b.Payload); err != nil {
			rows.Close()
			return nil, s.wrap(ctx, "take lease samples", err)
		}
		out = append(out, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "take lease samples", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap(ctx, "take lease samples", err)
	}
	slices.SortFunc(out, func(a, b LeaseSamples) int {
		if c := strings.Compare(a.Shard, b.Shard); c != 0 {
			return c
		}
		return cmpInt(a.Seq, b.Seq)
	})
	return out, nil
}

var _ Leases = (*sqlStore)(nil)
