package postgres_test

import (
	"testing"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.New(t) })
}

func BenchmarkInsertInvoices(b *testing.B) { storetest.BenchmarkInsertInvoices(b, pgtest.New(b)) }

func BenchmarkInsertBlock(b *testing.B) { storetest.BenchmarkInsertBlock(b, pgtest.New(b)) }
