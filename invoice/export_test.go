package invoice

// Test hooks.

// HashesRun reports how many Argon2id verifications the Authenticator ran.
func (a *Authenticator) HashesRun() int64 { return a.hashes.Load() }

// Authenticator returns the service's api_key authenticator.
func (s *Service) Authenticator() *Authenticator { return s.auth }

// RoutePatterns lists the "METHOD /path" patterns of every endpoint.
func RoutePatterns() []string {
	var out []string
	for _, r := range append(append([]route{}, routes...), outboundRoutes...) {
		out = append(out, r.method+" "+r.path)
	}
	return out
}

// RouteScopes is each endpoint's credential: a scope of merchants' keys,
// "owner", "operator" or "public".
func RouteScopes() map[string]string {
	out := map[string]string{}
	for _, r := range append(append([]route{}, routes...), outboundRoutes...) {
		out[r.method+" "+r.path] = r.scope
	}
	return out
}

// RequestFingerprint is the idempotency fingerprint of a request.
var RequestFingerprint = requestFingerprint

// VerifyAPIKey checks a key against a PHC Argon2id hash.
var VerifyAPIKey = verifyAPIKey

// SetBatchHook makes the committer call fn with each batch's size before
// the batch's transaction. Set it before the first creation.
func (s *Service) SetBatchHook(fn func(size int)) { s.batcher.hook = fn }

// CreationQueue reports how many creations wait for the committer and
// whether a committer goroutine is running.
func (s *Service) CreationQueue() (queued int, running bool) { return s.batcher.state() }
