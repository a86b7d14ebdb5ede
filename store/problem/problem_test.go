package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/problem"
)

func TestWrite_RFC9457BodyWithCodeAndField(t *testing.T) {
	rec := httptest.NewRecorder()
	problem.Write(rec, problem.OfField(problem.CodeInvalidAmount, "amount_wei", "amount_wei must be a decimal string"))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	var got map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Equal(t, map[string]any{
		"type": "urn:evmpay:problem:invalid_amount", "title": "Bad Request", "status": float64(400),
		"detail": "amount_wei must be a decimal string", "code": "invalid_amount", "field": "amount_wei",
	}, got)
}

func TestWrite_401CarriesBearerChallenge(t *testing.T) {
	rec := httptest.NewRecorder()
	problem.Reply(rec, problem.CodeUnauthorized, "")
	require.Equal(t, `Bearer realm="evmpay"`, rec.Header().Get("WWW-Authenticate"))
	require.JSONEq(t, `{"type":"urn:evmpay:problem:unauthorized","title":"Unauthorized","status":401,"code":"unauthorized"}`, rec.Body.String())
}

func TestProblem_IsAnError(t *testing.T) {
	var err error = problem.Of(problem.CodeNotFound, "no such invoice")
	require.EqualError(t, err, "not_found: no such invoice")
}
