package tpmquote

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/eimhq/eim/fde/tpmseal"
)

// The AK's binding to the TPM's endorsement key (EK): the server wraps
// its nonce with TPM2_MakeCredential (done in Go, Challenge) to the EK's
// public key for the AK's name, and only a TPM that holds both that EK and
// a key of that name can unwrap it (TPM2_ActivateCredential, Activate). A
// quote over the nonce then proves that the AK that signed it lives in
// the TPM of that EK. The EK is the TCG's ECC P-256 EK (the default
// template): the TPM's long-lived identity, derived from its endorsement
// seed, which its maker's EK certificate names.

// Keys are the public areas (TPMT_PUBLIC) of a TPM's EK and AK, as
// Identify reads them and Challenge takes them.
type Keys struct {
	EKPublic []byte
	AKPublic []byte
}

// Identify makes the TPM's EK (ECCEKTemplate) and AK (AKTemplate) and
// returns their public areas; both are flushed after.
func Identify(rw io.ReadWriter) (*Keys, error) {
	tpm := tpmseal.Transport(rw)
	ek, ak, release, err := createKeys(tpm)
	if err != nil {
		return nil, err
	}
	defer release()
	return &Keys{EKPublic: ek.OutPublic.Bytes(), AKPublic: ak.OutPublic.Bytes()}, nil
}

// createKeys makes the TPM's EK and AK; release flushes both.
func createKeys(tpm transport.TPM) (ek, ak *tpm2.CreatePrimaryResponse, release func(), err error) {
	if ek, err = createEK(tpm); err != nil {
		return nil, nil, nil, err
	}
	if ak, err = createAK(tpm); err != nil {
		flush(tpm, ek.ObjectHandle)
		return nil, nil, nil, err
	}
	return ek, ak, func() { flush(tpm, ak.ObjectHandle); flush(tpm, ek.ObjectHandle) }, nil
}

func createEK(tpm transport.TPM) (*tpm2.CreatePrimaryResponse, error) {
	ek, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tpm2.ECCEKTemplate),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmquote: create the endorsement key: %w", err)
	}
	return ek, nil
}

func createAK(tpm transport.TPM) (*tpm2.CreatePrimaryResponse, error) {
	ak, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(AKTemplate),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmquote: create the attestation key: %w", err)
	}
	return ak, nil
}

// Challenge wraps secret (at most 32 bytes: the nonce) for the TPM whose
// EK and AK k names, as TPM2_MakeCredential does: the credential blob and
// the encrypted seed Activate takes. It checks that the EK is a restricted
// decryption key fixed to a TPM, and the AK a restricted signing key.
func Challenge(k Keys, secret []byte) (blob, encSecret []byte, err error) {
	if err := CheckKeys(k); err != nil {
		return nil, nil, err
	}
	ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](k.EKPublic)
	if err != nil {
		return nil, nil, err
	}
	akName, err := name(k.AKPublic)
	if err != nil {
		return nil, nil, err
	}
	kem, err := tpm2.ImportEncapsulationKey(ek)
	if err != nil {
		return nil, nil, fmt.Errorf("the endorsement key: %w", err)
	}
	blob, encSecret, err = tpm2.CreateCredential(rand.Reader, kem, akName, secret)
	if err != nil {
		return nil, nil, fmt.Errorf("make the credential: %w", err)
	}
	return blob, encSecret, nil
}

// Activate unwraps a credential Challenge made for this TPM's EK and AK
// (TPM2_ActivateCredential, the EK authorized by its policy: PolicySecret
// of the endorsement hierarchy) and returns its secret. Another TPM, or
// a credential for another AK, fails.
func Activate(rw io.ReadWriter, blob, encSecret []byte) ([]byte, error) {
	tpm := tpmseal.Transport(rw)
	ek, ak, release, err := createKeys(tpm)
	if err != nil {
		return nil, err
	}
	defer release()
	r, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle: tpm2.AuthHandle{Handle: ek.ObjectHandle, Name: ek.Name, Auth: tpm2.Policy(tpm2.TPMAlgSHA256, 16,
			func(tpm transport.TPM, h tpm2.TPMISHPolicy, nonceTPM tpm2.TPM2BNonce) error {
				_, err := tpm2.PolicySecret{
					AuthHandle:    tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
					PolicySession: h,
					NonceTPM:      nonceTPM,
				}.Execute(tpm)
				return err
			})},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: blob},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: encSecret},
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmquote: activate the credential: %w", err)
	}
	return r.CertInfo.Buffer, nil
}

// CheckKeys checks that k's EK is a restricted decryption key fixed to a
// TPM and its AK a restricted signing key generated in and fixed to one.
func CheckKeys(k Keys) error {
	ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](k.EKPublic)
	if err != nil {
		return fmt.Errorf("the endorsement key's public area does not parse: %w", err)
	}
	if a := ek.ObjectAttributes; !a.Restricted || !a.Decrypt || a.SignEncrypt || !a.FixedTPM {
		return errors.New("the endorsement key is not a restricted decryption key fixed to a TPM")
	}
	if _, err := tpm2.ImportEncapsulationKey(ek); err != nil {
		return fmt.Errorf("the endorsement key: %w", err)
	}
	return checkAK(k.AKPublic)
}
