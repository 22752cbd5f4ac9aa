package agent

// DeniedWait exposes deniedWait to the package's black-box tests.
var DeniedWait = deniedWait
