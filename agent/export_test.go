package agent

// DeniedWait exposes deniedWait to the package's black-box tests.
var DeniedWait = deniedWait

// FormatRoot and UnsealKey expose how encrypt-root writes the encrypted
// root's header and how the installed OS unseals its key, for tests on
// an image file (the action itself maps the volume: device-mapper).
var (
	FormatRoot = formatRoot
	UnsealKey  = unsealKey
)
