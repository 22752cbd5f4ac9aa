package tpmseal

import "io"

// SealRSA seals under systemd's RSA primary key, as Seal does on a TPM
// that cannot make the ECC one (swtpm can, so Seal never falls back in
// tests).
func SealRSA(rw io.ReadWriter, secret []byte, pcrs []int) (*Sealed, error) {
	return seal(rw, secret, pcrs, []string{"rsa"})
}

// PrimaryTemplate is systemd 252's primary key template for alg.
var PrimaryTemplate = systemdPrimary

// CheckSealed takes s apart as Unseal does before it talks to the TPM.
func CheckSealed(s *Sealed) error {
	_, err := s.parse()
	return err
}
