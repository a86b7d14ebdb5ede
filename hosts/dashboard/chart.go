package dashboard

import (
	"context"
	"math/big"
	"strconv"
	"time"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

// The overview's chart: what was paid per day and asset, drawn as SVG by
// Go (no script, no library): one series per asset, bars scaled to the
// series' own largest day, with a text table beside it for screen readers
// (the SVG is a picture; the numbers are in the table).

type chart struct {
	Series []series
	Days   []string
	W, H   int
}

type series struct {
	Asset string
	Bars  []bar
	Max   string
	Class string
}

type bar struct {
	X, Y, W, H int
	Day        string
	Value      string
}

func dailyChart(today time.Time, days int, syms []string, assets map[string]store.Asset,
	daily map[string]map[string]store.Amount) chart {
	c := chart{W: 600, H: 120}
	for i := days - 1; i >= 0; i-- {
		c.Days = append(c.Days, today.AddDate(0, 0, -i).Format("2006-01-02"))
	}
	bw := c.W / days
	for n, sym := range syms {
		a := assets[sym]
		max := new(big.Int)
		for _, day := range c.Days {
			if v, ok := daily[sym][day]; ok && v.Big().Cmp(max) > 0 {
				max = v.Big()
			}
		}
		s := series{Asset: sym, Max: a.Format(mustAmount(max)), Class: "s" + strconv.Itoa(n%4)}
		for i, day := range c.Days {
			v := daily[sym][day]
			h := 0
			if max.Sign() > 0 {
				h = int(new(big.Int).Div(new(big.Int).Mul(v.Big(), big.NewInt(int64(c.H-10))), max).Int64())
				if h == 0 && !v.IsZero() {
					h = 1
				}
			}
			s.Bars = append(s.Bars, bar{X: i*bw + 1, Y: c.H - h, W: bw - 2, H: h, Day: day, Value: a.Format(v)})
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func mustAmount(b *big.Int) store.Amount {
	a, err := store.AmountFromBig(b)
	if err != nil {
		return store.Amount{}
	}
	return a
}

func contextWithPrincipal(ctx context.Context, p invoice.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}
