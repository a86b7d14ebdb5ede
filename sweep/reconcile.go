package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"sort"
	"strconv"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// ReconcilePath is the operator endpoint of the reconciliation.
const ReconcilePath = "/v1/admin/reconciliation"

// ReconcileStore is what the reconciliation reads: the ledger, the
// service's wallets and deposit addresses, and the ledger's cursor.
type ReconcileStore interface {
	ScanLedgerEntries(ctx context.Context, s store.LedgerScan) ([]store.LedgerEntry, error)
	ListServiceWallets(ctx context.Context) ([]store.ServiceWallet, error)
	IsDepositAddress(ctx context.Context, addr common.Address) (bool, error)
	GetCursor(ctx context.Context, name string) (store.Cursor, error)
}

// ReconcileChain reads balances at a block: go-ethereum's clients satisfy
// it.
type ReconcileChain interface {
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	ethereum.ContractCaller
}

// Reconciliation compares the ledger's balance of every wallet of the
// service (deposit addresses with movements, payout wallets, the sweep
// wallet, the gas funder) with the chain's, per asset, at one block.
type Reconciliation struct {
	// Block is where balances are compared: the ledger's follower's block
	// (LedgerCursor), up to which the ledger holds every movement.
	Block uint64 `json:"block"`
	// Entries is how many ledger entries (of blocks up to Block) were read.
	Entries int `json:"entries"`
	// Wallets lists every wallet and asset compared.
	Wallets []WalletBalance `json:"wallets"`
	// Differences counts those whose ledger and chain balances differ;
	// OK is true when there are none.
	Differences int  `json:"differences"`
	OK          bool `json:"ok"`
}

// WalletBalance is one wallet's balance of one asset in the ledger and on
// chain.
type WalletBalance struct {
	Address store.ChecksumAddress `json:"address"`
	// Role is "deposit", "payout", "sweep" or "funder".
	Role       string `json:"role"`
	MerchantID *int64 `json:"merchant_id,omitempty"`
	// Token is the asset's contract; null for the native coin.
	Token *store.ChecksumAddress `json:"token"`
	// Ledger and Chain are the two balances in base units; Difference is
	// chain − ledger (may be negative: a decimal integer with its sign).
	Ledger     string `json:"ledger"`
	Chain      string `json:"chain"`
	Difference string `json:"difference"`
	OK         bool   `json:"ok"`
}

// ReconcileConfig tunes a Reconciler.
type ReconcileConfig struct {
	// Tokens are the configured tokens whose balances are compared.
	// Defaults to none (the native coin only).
	Tokens []common.Address
	// OperatorToken authenticates the endpoint. Defaults to "": the
	// endpoint answers 503.
	OperatorToken string
	// Registerer receives evmpay_sweep_ledger_unreconciled_wallets when
	// set. Defaults to nil.
	Registerer prometheus.Registerer
	// Logger receives the differences found. Defaults to a logger that
	// discards.
	Logger *slog.Logger
}

// Reconciler compares the ledger with the chain. It needs the database and
// a node, no key: any process may serve it.
type Reconciler struct {
	st    ReconcileStore
	chain ReconcileChain
	cfg   ReconcileConfig
	gauge prometheus.Gauge
}

// NewReconciler returns a Reconciler.
func NewReconciler(st ReconcileStore, chain ReconcileChain, cfg ReconcileConfig) (*Reconciler, error) {
	if st == nil || chain == nil {
		return nil, errors.New("sweep: a store and a chain are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Reconciler{st: st, chain: chain, cfg: cfg, gauge: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "evmpay",
		Subsystem: "sweep", Name: "ledger_unreconciled_wallets",
		Help: "Wallet and asset pairs whose ledger balance differs from the chain at the last reconciliation (alert)."})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.gauge); err != nil {
			return nil, err
		}
	}
	return r, nil
}

type balanceKey struct {
	addr  common.Address
	token common.Address // zero: native
}

// Reconcile compares, at the ledger follower's block (or at block when it
// is non-zero and not above it), the ledger's balance of every service
// wallet and of every deposit address that has movements with the chain's,
// for the native coin and every configured token: Σ entries to it − Σ
// entries from it (for a service wallet, its opening balance and the
// entries of the blocks after it) against eth_getBalance and balanceOf.
// Exact, to the base unit.
func (r *Reconciler) Reconcile(ctx context.Context, block uint64) (Reconciliation, error) {
	cur, err := r.st.GetCursor(ctx, LedgerCursor)
	if errors.Is(err, store.ErrNotFound) {
		return Reconciliation{}, errors.New("sweep: the ledger has not started yet (the sweep role starts it)")
	}
	if err != nil {
		return Reconciliation{}, err
	}
	if block == 0 || block > cur.BlockNumber {
		block = cur.BlockNumber
	}
	ledger := map[balanceKey]*big.Int{}
	add := func(addr *common.Address, token *common.Address, v *big.Int, sign int) {
		if addr == nil {
			return
		}
		k := balanceKey{addr: *addr}
		if token != nil {
			k.token = *token
		}
		b := ledger[k]
		if b == nil {
			b = new(big.Int)
			ledger[k] = b
		}
		if sign > 0 {
			b.Add(b, v)
		} else {
			b.Sub(b, v)
		}
	}
	// A service wallet's balance is its opening balance plus the entries
	// of the blocks after it: the opening balance holds the earlier ones.
	ws, err := r.st.ListServiceWallets(ctx)
	if err != nil {
		return Reconciliation{}, err
	}
	openedAt := map[common.Address]uint64{}
	for _, w := range ws {
		if w.LedgerFromBlock != nil {
			openedAt[w.Address] = *w.LedgerFromBlock
		}
	}
	held := func(addr *common.Address, e store.LedgerEntry) bool {
		if addr == nil || e.Kind == store.LedgerOpeningBalance || e.BlockNumber == nil {
			return false
		}
		from, ok := openedAt[*addr]
		return ok && *e.BlockNumber <= from
	}
	rec := Reconciliation{Block: block}
	scan := store.LedgerScan{MaxBlock: block, Limit: 5000}
	for {
		es, err := r.st.ScanLedgerEntries(ctx, scan)
		if err != nil {
			return Reconciliation{}, err
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			v := e.Amount.Big()
			if !held(e.To, e) {
				add(e.To, e.Token, v, +1)
			}
			if !held(e.From, e) {
				add(e.From, e.Token, v, -1)
			}
		}
		rec.Entries += len(es)
		scan.AfterID = es[len(es)-1].ID
	}
	type wallet struct {
		role     string
		merchant *int64
	}
	wallets := map[common.Address]wallet{}
	for _, w := range ws {
		wallets[w.Address] = wallet{role: w.Role, merchant: w.MerchantID}
	}
	for k := range ledger {
		if _, known := wallets[k.addr]; known {
			continue
		}
		dep, err := r.st.IsDepositAddress(ctx, k.addr)
		if err != nil {
			return Reconciliation{}, err
		}
		if dep {
			wallets[k.addr] = wallet{role: "deposit"}
		}
	}
	addrs := make([]common.Address, 0, len(wallets))
	for a := range wallets {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Cmp(addrs[j]) < 0 })
	n := new(big.Int).SetUint64(block)
	for _, a := range addrs {
		bals, err := balancesAt(ctx, r.chain, a, r.cfg.Tokens, n)
		if err != nil {
			return Reconciliation{}, fmt.Errorf("balance of %s: %w", a.Hex(), err)
		}
		for _, b := range bals {
			var t common.Address // the zero address: the native coin
			if b.token != nil {
				t = *b.token
			}
			chainBal := b.amount
			led, moved := ledger[balanceKey{addr: a, token: t}]
			if led == nil {
				led = new(big.Int)
			}
			// Every asset a wallet moved or holds is compared, a balance
			// that came back to 0 included; an asset it never touched
			// (0 in the ledger and on chain) only for a service wallet's
			// native coin.
			if !moved && chainBal.Sign() == 0 && (t != (common.Address{}) || wallets[a].role == "deposit") {
				continue
			}
			diff := new(big.Int).Sub(chainBal, led)
			wb := WalletBalance{Address: store.ChecksumAddress(a), Role: wallets[a].role, MerchantID: wallets[a].merchant,
				Ledger: led.String(), Chain: chainBal.String(), Difference: diff.String(), OK: diff.Sign() == 0}
			if t != (common.Address{}) {
				ct := store.ChecksumAddress(t)
				wb.Token = &ct
			}
			if !wb.OK {
				rec.Differences++
				r.cfg.Logger.WarnContext(ctx, "ledger: a wallet's balance differs from the chain", slog.String("address", a.Hex()),
					slog.String("role", wb.Role), slog.String("token", t.Hex()), slog.String("ledger", wb.Ledger),
					slog.String("chain", wb.Chain), slog.Uint64("block", block))
			}
			rec.Wallets = append(rec.Wallets, wb)
		}
	}
	if rec.Wallets == nil {
		rec.Wallets = []WalletBalance{}
	}
	rec.OK = rec.Differences == 0
	r.gauge.Set(float64(rec.Differences))
	return rec, nil
}

// Register adds GET /v1/admin/reconciliation (operator token; ?block=N to
// compare at an earlier block) to mux.
func (r *Reconciler) Register(mux httpapi.Router) {
	mux.Handle("GET "+ReconcilePath, http.HandlerFunc(r.serve))
}

func (r *Reconciler) serve(w http.ResponseWriter, req *http.Request) {
	if r.cfg.OperatorToken == "" {
		problem.Reply(w, problem.CodeAdminDisabled, "no operator token is configured")
		return
	}
	if !httpapi.OperatorAuthorized(req, r.cfg.OperatorToken) {
		problem.Reply(w, problem.CodeUnauthorized, "a valid operator token is required")
		return
	}
	q, perr := httpapi.Query(req)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	var block uint64
	for name, vals := range q {
		if name != "block" {
			problem.Write(w, problem.OfField(problem.CodeUnknownParameter, name, "unknown query parameter "+strconv.Quote(name)+" (allowed: block)"))
			return
		}
		n, err := strconv.ParseUint(vals[0], 10, 64)
		if err != nil || len(vals) > 1 || n == 0 {
			problem.Write(w, problem.OfField(problem.CodeInvalidParameter, "block", "block must be one positive block number"))
			return
		}
		block = n
	}
	rec, err := r.Reconcile(req.Context(), block)
	if err != nil {
		r.cfg.Logger.WarnContext(req.Context(), "ledger: reconciliation", slog.String("error", err.Error()))
		problem.Reply(w, problem.CodeUnavailable, "the reconciliation could not be made now (is the ledger started, the node reachable?); retry later")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, rec)
}
