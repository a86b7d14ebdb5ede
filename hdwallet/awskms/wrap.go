package awskms

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// WrapAPI is what a Wrapper needs from KMS; *kms.Client satisfies it.
type WrapAPI interface {
	Encrypt(ctx context.Context, in *kms.EncryptInput, opts ...func(*kms.Options)) (*kms.EncryptOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// contextKey is the encryption-context key that carries the associated
// data of a wrapped data key (KMS binds the context like AAD, and logs it
// in CloudTrail: it names the secret, never its value).
const contextKey = "evmpay-sealed"

// Wrapper encrypts and decrypts the data keys of sealed secrets under a
// KMS symmetric key (SYMMETRIC_DEFAULT, ENCRYPT_DECRYPT). It satisfies
// sealed.KeyWrapper.
type Wrapper struct {
	api   WrapAPI
	keyID string
}

// NewWrapper returns the wrapper of keyID (key id, ARN or alias). It makes
// no call: a wrong key shows at the first WrapKey or UnwrapKey.
func NewWrapper(api WrapAPI, keyID string) *Wrapper { return &Wrapper{api: api, keyID: keyID} }

// Provider is "awskms".
func (w *Wrapper) Provider() string { return "awskms" }

// KeyID is the key id, ARN or alias.
func (w *Wrapper) KeyID() string { return w.keyID }

// String names the key.
func (w *Wrapper) String() string { return "awskms:" + w.keyID }

// LogValue logs the key's name.
func (w *Wrapper) LogValue() slog.Value { return slog.StringValue(w.String()) }

// WrapKey encrypts a data key with KMS Encrypt, binding aad as the
// encryption context.
func (w *Wrapper) WrapKey(ctx context.Context, dataKey, aad []byte) ([]byte, error) {
	out, err := w.api.Encrypt(ctx, &kms.EncryptInput{
		KeyId:               aws.String(w.keyID),
		Plaintext:           dataKey,
		EncryptionContext:   map[string]string{contextKey: base64.RawURLEncoding.EncodeToString(aad)},
		EncryptionAlgorithm: kmstypes.EncryptionAlgorithmSpecSymmetricDefault,
	})
	if err != nil {
		return nil, keyError(w.keyID, "encrypt a data key with", err, ErrNotWrappingKey)
	}
	return out.CiphertextBlob, nil
}

// UnwrapKey decrypts what WrapKey returned with KMS Decrypt, checking aad
// and that keyID wrapped it.
func (w *Wrapper) UnwrapKey(ctx context.Context, wrapped, aad []byte) ([]byte, error) {
	out, err := w.api.Decrypt(ctx, &kms.DecryptInput{
		KeyId:               aws.String(w.keyID),
		CiphertextBlob:      wrapped,
		EncryptionContext:   map[string]string{contextKey: base64.RawURLEncoding.EncodeToString(aad)},
		EncryptionAlgorithm: kmstypes.EncryptionAlgorithmSpecSymmetricDefault,
	})
	if err != nil {
		return nil, keyError(w.keyID, "decrypt a data key with", err, ErrNotWrappingKey)
	}
	if len(out.Plaintext) == 0 {
		return nil, fmt.Errorf("awskms: key %s returned an empty data key", w.keyID)
	}
	return out.Plaintext, nil
}
