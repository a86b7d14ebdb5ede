package sweep

import (
	"math/big"

	"github.com/evmpay/evmpay/store"
)

// transferGas is the gas of a plain transfer to an account without code.
const transferGas = 21000

// fee is an EIP-1559 price: the most a transaction pays per gas (cap) and
// the part of it offered to the block producer (tip).
type fee struct {
	cap, tip *big.Int
}

// freshFee prices a new transaction at the pass's head:
//
//	tip = max(suggested tip, 1 wei), raised so that ⅞ × base fee + tip ≥ MinGasPrice
//	cap = max(2 × base fee + tip, MinGasPrice), at most MaxFeePerGas
//
// Twice the base fee leaves room for six full blocks of base-fee growth;
// the base fee falls by at most ⅛ a block, so a transaction mined in the
// next block still pays the chain's minimum. Neither the base fee nor the
// tip is ever divided by: both can be 0 on Cosmos EVM chains.
func (s *Sweeper) freshFee(p *pass) fee {
	tip := new(big.Int).Set(p.tip)
	minPrice := s.cfg.MinGasPrice.Big()
	nextBase := new(big.Int).Mul(p.baseFee, big.NewInt(7))
	nextBase.Rsh(nextBase, 3)
	if floor := new(big.Int).Sub(minPrice, nextBase); tip.Cmp(floor) < 0 {
		tip = floor
	}
	c := new(big.Int).Mul(p.baseFee, big.NewInt(2))
	c.Add(c, tip)
	c = bigMax(c, minPrice)
	return s.clamp(fee{cap: c, tip: tip})
}

// bumped prices a replacement of a transaction priced old: both the cap
// and the tip grow by at least 12.5% (nodes require 10%), and never fall
// below a fresh price.
func (s *Sweeper) bumped(p *pass, old fee) fee {
	fresh := s.freshFee(p)
	return s.clamp(fee{cap: bigMax(bump(old.cap), fresh.cap), tip: bigMax(bump(old.tip), fresh.tip)})
}

// replaceable reports whether a replacement priced next may replace one
// priced old: nodes refuse a replacement that does not raise both the cap
// and the tip by 10% (go-ethereum's price bump), so one that MaxFeePerGas
// held back from the full bump is not made; the fee ceiling is reached.
func replaceable(old, next fee) bool {
	return next.cap.Cmp(bump(old.cap)) >= 0 && next.tip.Cmp(bump(old.tip)) >= 0
}

// clamp applies MaxFeePerGas (always set: it has a default) and keeps
// tip ≤ cap.
func (s *Sweeper) clamp(f fee) fee {
	f.cap = bigMin(f.cap, s.cfg.MaxFeePerGas.Big())
	f.tip = bigMin(f.tip, f.cap)
	return f
}

// bump returns x + max(⌈x/8⌉, 1).
func bump(x *big.Int) *big.Int {
	inc := new(big.Int).Add(x, big.NewInt(7))
	inc.Rsh(inc, 3)
	if inc.Sign() == 0 {
		inc.SetInt64(1)
	}
	return inc.Add(inc, x)
}

// gasCost is gas × price.
func gasCost(gas uint64, price *big.Int) *big.Int {
	return new(big.Int).Mul(new(big.Int).SetUint64(gas), price)
}

func feeOf(t store.SweepTx) fee {
	return fee{cap: t.MaxFeeWei.Big(), tip: t.MaxPriorityFeeWei.Big()}
}
