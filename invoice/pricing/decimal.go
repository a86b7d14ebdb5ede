package pricing

import (
	"errors"
	"math"
	"math/big"

	"github.com/evmpay/evmpay/store"
)

// sigDigits is the precision of a derived rate (a cross rate, an inverted
// FX rate): rounded half up to 18 significant digits, a relative error
// below 5e-18. Rates read from a source and medians are exact.
const sigDigits = 18

var (
	bigTen   = big.NewInt(10)
	minSig   = new(big.Int).Exp(bigTen, big.NewInt(sigDigits-1), nil) // 10^17
	limitSig = new(big.Int).Exp(bigTen, big.NewInt(sigDigits), nil)   // 10^18
)

// roundSig returns r (positive) rounded half up to sigDigits significant
// digits, or to MaxDecimalScale digits after the point when that is fewer.
func roundSig(r *big.Rat) (store.Decimal, error) {
	if r.Sign() < 0 {
		return store.Decimal{}, errors.New("pricing: negative rate")
	}
	if r.Sign() == 0 {
		return store.Decimal{}, nil
	}
	// Estimate log10(r) from the bit lengths, then correct by a step.
	e := int(math.Floor(float64(r.Num().BitLen()-r.Denom().BitLen()) * math.Log10(2)))
	s := sigDigits - 1 - e
	for {
		s = min(max(s, 0), store.MaxDecimalScale)
		q := scaleRound(r, s)
		switch {
		case q.Cmp(limitSig) >= 0 && s > 0:
			s--
		case q.Cmp(minSig) < 0 && s < store.MaxDecimalScale:
			s++
		default:
			return store.NewDecimal(q, uint8(s))
		}
	}
}

// powers10 holds 10^0 … 10^(2·MaxDecimalScale+1); never modify them.
var powers10 = func() []*big.Int {
	out := make([]*big.Int, 2*store.MaxDecimalScale+2)
	p := big.NewInt(1)
	for i := range out {
		out[i] = new(big.Int).Set(p)
		p.Mul(p, bigTen)
	}
	return out
}()

// pow10 returns 10^n (n ≥ 0); callers must not modify the result.
func pow10(n int) *big.Int {
	if n < len(powers10) {
		return powers10[n]
	}
	return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil)
}

// scaleRound returns r × 10^s rounded half up to an integer.
func scaleRound(r *big.Rat, s int) *big.Int {
	num := new(big.Int).Mul(r.Num(), pow10(s))
	num.Lsh(num, 1).Add(num, r.Denom()) // (2·num + den) / (2·den) = round half up
	return num.Quo(num, new(big.Int).Lsh(r.Denom(), 1))
}

// mul returns a × b, rounded to sigDigits.
func mul(a, b store.Decimal) (store.Decimal, error) {
	return roundSig(new(big.Rat).Mul(a.Rat(), b.Rat()))
}

// quo returns a ÷ b (b non-zero), rounded to sigDigits.
func quo(a, b store.Decimal) (store.Decimal, error) {
	if b.IsZero() {
		return store.Decimal{}, errors.New("pricing: division by a zero rate")
	}
	return roundSig(new(big.Rat).Quo(a.Rat(), b.Rat()))
}

// mean2 returns (a + b) / 2, exact when it fits in a Decimal's scale.
func mean2(a, b store.Decimal) (store.Decimal, error) {
	s := int(max(a.Scale(), b.Scale()))
	sum := new(big.Int).Mul(a.Coef(), pow10(s-int(a.Scale())))
	sum.Add(sum, new(big.Int).Mul(b.Coef(), pow10(s-int(b.Scale()))))
	sum.Mul(sum, big.NewInt(5)) // ÷ 2 = × 5 ÷ 10
	if s+1 <= store.MaxDecimalScale {
		if d, err := store.NewDecimal(sum, uint8(s+1)); err == nil {
			return d, nil
		}
	}
	return roundSig(new(big.Rat).SetFrac(sum, pow10(s+1)))
}

// deviates reports whether |v − m| / m > bps / 10000, exactly.
func deviates(v, m store.Decimal, bps int) bool {
	d := new(big.Rat).Sub(v.Rat(), m.Rat())
	d.Abs(d).Mul(d, big.NewRat(10000, 1))
	limit := new(big.Rat).Mul(m.Rat(), big.NewRat(int64(bps), 1))
	return d.Cmp(limit) > 0
}
