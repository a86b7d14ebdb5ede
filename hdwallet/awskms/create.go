package awskms

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// CreateAPI is what creating keys needs from KMS; *kms.Client satisfies it.
type CreateAPI interface {
	CreateKey(ctx context.Context, in *kms.CreateKeyInput, opts ...func(*kms.Options)) (*kms.CreateKeyOutput, error)
}

// CreateSigningKey creates an ECC_SECG_P256K1 SIGN_VERIFY key (its private
// half never leaves KMS) and returns its key id. Give it an alias and a key
// policy with your usual tools; the service needs kms:GetPublicKey and
// kms:Sign on it.
func CreateSigningKey(ctx context.Context, api CreateAPI, description string) (string, error) {
	out, err := api.CreateKey(ctx, &kms.CreateKeyInput{
		KeySpec:     kmstypes.KeySpecEccSecgP256k1,
		KeyUsage:    kmstypes.KeyUsageTypeSignVerify,
		Description: aws.String(description),
	})
	if err != nil {
		return "", keyError("(new)", "create", err, ErrNotSigningKey)
	}
	return aws.ToString(out.KeyMetadata.KeyId), nil
}

// CreateWrapKey creates a symmetric ENCRYPT_DECRYPT key for sealing
// secrets and returns its key id. The service needs kms:Decrypt on it (and
// kms:Encrypt where secrets are sealed).
func CreateWrapKey(ctx context.Context, api CreateAPI, description string) (string, error) {
	out, err := api.CreateKey(ctx, &kms.CreateKeyInput{
		KeySpec:     kmstypes.KeySpecSymmetricDefault,
		KeyUsage:    kmstypes.KeyUsageTypeEncryptDecrypt,
		Description: aws.String(description),
	})
	if err != nil {
		return "", keyError("(new)", "create", err, ErrNotWrappingKey)
	}
	return aws.ToString(out.KeyMetadata.KeyId), nil
}
