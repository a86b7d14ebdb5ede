package hdwallet

import (
	"testing"
)

// BenchmarkDeriverAddress measures the invoice API's path: one non-hardened
// step from the cached account node, then Keccak-256. Target ≥ 20,000
// addr/s on one core.
func BenchmarkDeriverAddress(b *testing.B) {
	d := junkWallet(b).Deriver()
	b.ReportAllocs()
	b.ResetTimer()
	var i uint32
	for b.Loop() {
		if _, err := d.Address(i % HardenedOffset); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "addr/s")
}

// BenchmarkDeriverAddressParallel is the same on all GOMAXPROCS cores.
func BenchmarkDeriverAddressParallel(b *testing.B) {
	d := junkWallet(b).Deriver()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var i uint32
		for pb.Next() {
			if _, err := d.Address(i); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "addr/s")
}

// BenchmarkFullPathFromSeed derives m/44'/60'/0'/0/i from the seed every
// time: master key, four account steps (three hardened), the index step.
func BenchmarkFullPathFromSeed(b *testing.B) {
	m, err := ParseMnemonic(junkMnemonic)
	if err != nil {
		b.Fatal(err)
	}
	seed := m.Seed("")
	b.ReportAllocs()
	b.ResetTimer()
	var i uint32
	for b.Loop() {
		master, err := NewMasterKey(seed)
		if err != nil {
			b.Fatal(err)
		}
		path, _ := DepositPath(i % HardenedOffset)
		k, err := master.Derive(path)
		if err != nil {
			b.Fatal(err)
		}
		_ = k.Address()
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "addr/s")
}

// BenchmarkFullPathFromMnemonic adds BIP-39 (PBKDF2, 2048 rounds of
// HMAC-SHA512) to the full path: the cost of opening a wallet.
func BenchmarkFullPathFromMnemonic(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseMnemonic(junkMnemonic)
		if err != nil {
			b.Fatal(err)
		}
		w, err := NewWallet(m, "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Deriver().Address(0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "addr/s")
}

// BenchmarkWalletPrivateKey is sweep's path: one private step from the
// cached account node and the conversion to go-ethereum's key type.
func BenchmarkWalletPrivateKey(b *testing.B) {
	w := junkWallet(b)
	b.ReportAllocs()
	b.ResetTimer()
	var i uint32
	for b.Loop() {
		if _, err := w.PrivateKey(i % HardenedOffset); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

// BenchmarkDeriverAddresses16 is Deriver.Addresses in runs of 16 (the
// invoice API's address cache), per address.
func BenchmarkDeriverAddresses16(b *testing.B) {
	d := junkWallet(b).Deriver()
	b.ReportAllocs()
	b.ResetTimer()
	var i uint32
	for b.Loop() {
		if _, err := d.Addresses(i%(HardenedOffset-16), 16); err != nil {
			b.Fatal(err)
		}
		i += 16
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "addr/s")
}
