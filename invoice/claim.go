package invoice

import (
	"cmp"
	"errors"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// The claim link of a refund made without a destination: the payer opens
// the claim page (invoice/checkout, /claim#<token>), which reads the refund
// and sends the payer's address with the claim token as its bearer
// credential. The token is 128 random bits, stored hashed, shown once in
// the response that creates the refund; failed lookups count against the
// client like the checkout page's.

// claimView is what a payer sees of a refund: what the claim page shows,
// nothing the merchant keeps to itself.
type claimView struct {
	Status          string                 `json:"status"`
	Asset           store.Asset            `json:"asset"`
	Amount          store.Amount           `json:"amount"`
	AmountFormatted string                 `json:"amount_formatted"`
	ChainID         uint64                 `json:"chain_id"`
	Destination     *store.ChecksumAddress `json:"destination"`
	MerchantName    string                 `json:"merchant_name"`
	OrderID         string                 `json:"order_id,omitempty"`
	Description     string                 `json:"description,omitempty"`
	Reason          string                 `json:"reason"`
	// PaidBy is "service" or "merchant" (the merchant sends it from its
	// own wallet).
	PaidBy      string       `json:"paid_by"`
	TxHash      *common.Hash `json:"tx_hash"`
	CreatedAt   time.Time    `json:"created_at"`
	ConfirmedAt *time.Time   `json:"confirmed_at,omitempty"`
}

// claimed finds the refund of the request's bearer claim token, writing
// the problem when there is none (and counting the failure).
func (s *Service) claimed(w http.ResponseWriter, r *http.Request) (store.Outbound, bool) {
	now := s.cfg.Now()
	if wait, blocked := s.lookups.blocked(r, now); blocked {
		w.Header().Set("Retry-After", retryAfter(wait))
		problem.Write(w, errTooManyLookups)
		return store.Outbound{}, false
	}
	tok, ok := httpapi.BearerToken(r)
	if !ok || !wellFormedLookupToken(tok) {
		s.lookups.failed(r, now)
		problem.Write(w, errUnauthorized)
		return store.Outbound{}, false
	}
	o, err := s.st.GetOutboundByClaimTokenHash(r.Context(), LookupTokenHash(tok))
	if errors.Is(err, store.ErrNotFound) {
		s.lookups.failed(r, now)
		problem.Write(w, errUnauthorized)
		return store.Outbound{}, false
	}
	if err != nil {
		s.fail(w, r, err)
		return store.Outbound{}, false
	}
	return o, true
}

func (s *Service) claimJSON(r *http.Request, o store.Outbound) (claimView, error) {
	m, err := s.st.GetMerchant(r.Context(), o.MerchantID)
	if err != nil {
		return claimView{}, err
	}
	a := o.Asset()
	v := claimView{Status: o.Status, Asset: a, Amount: o.Amount, AmountFormatted: a.Format(o.Amount), ChainID: cmp.Or(o.ChainID, s.homeChain().id),
		MerchantName: m.Name, Reason: o.Reason, PaidBy: map[string]string{store.PaidByService: "service", store.PaidByMerchant: "merchant"}[o.PaidBy],
		TxHash: o.TxHash, CreatedAt: o.CreatedAt.UTC()}
	if o.ConfirmedAt != nil {
		t := o.ConfirmedAt.UTC()
		v.ConfirmedAt = &t
	}
	if o.Destination != nil {
		d := store.ChecksumAddress(*o.Destination)
		v.Destination = &d
	}
	if o.InvoiceID != nil {
		if inv, err := s.st.GetInvoice(r.Context(), *o.InvoiceID); err == nil {
			v.OrderID, v.Description = inv.OrderID, inv.Description
		} else if !errors.Is(err, store.ErrNotFound) {
			return claimView{}, err
		}
	}
	return v, nil
}

func (s *Service) handlePublicRefund(w http.ResponseWriter, r *http.Request) {
	o, ok := s.claimed(w, r)
	if !ok {
		return
	}
	v, err := s.claimJSON(r, o)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, v)
}

// handleClaimDestination takes the payer's address, once: {"destination":
// "0x…"}. It is checked as a merchant's is (an address of this service or a
// contract is refused), and the refund moves on to its next gate.
func (s *Service) handleClaimDestination(w http.ResponseWriter, r *http.Request) {
	o, ok := s.claimed(w, r)
	if !ok {
		return
	}
	if !httpapi.CheckJSON(w, r) {
		return
	}
	body, perr := readBody(w, r, 4<<10)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	ms, perr := members(body, "destination")
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	dest, perr := parseAddressMember("destination", ms["destination"])
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	if err := s.checkDestination(r.Context(), "destination", dest); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now()
	err := s.st.InTx(r.Context(), func(tx store.Tx) error {
		cur, err := tx.GetOutboundForUpdate(r.Context(), o.ID)
		if err != nil {
			return err
		}
		if cur.Status != store.OutboundAwaitingDestination {
			return problem.Of(problem.CodeStateConflict, "this refund already has its destination (or is no longer waiting for one)")
		}
		policy, err := policyOf(r.Context(), tx, cur.MerchantID)
		if err != nil {
			return err
		}
		cur.Destination, cur.UpdatedAt = &dest, now
		if err := s.gate(&cur, policy); err != nil {
			return err
		}
		if err := tx.UpdateOutbound(r.Context(), &cur); err != nil {
			return err
		}
		o = cur
		return insertEvents(r.Context(), tx, cur, false, now)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.claimJSON(r, o)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
