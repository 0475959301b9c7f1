package store

import (
	"testing"

	"github.com/tierscope/tierscope/internal/store/pgtest"
)

// TestPostgresContract runs against a real server: TIERSCOPE_TEST_POSTGRES_DSN,
// or a throwaway cluster of the installed PostgreSQL (see pgtest). It is skipped
// when there is neither, except under CI=true, where it fails.
func TestPostgresContract(t *testing.T) {
	runContract(t, func(t testing.TB) string { return pgtest.DSN(t) })
}
