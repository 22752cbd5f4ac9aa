package redfishsim

import (
	"fmt"
	"net/http"
	"strings"
)

// registry is the Base message registry version the messages cite.
const registry = "Base.1.16."

// message is one entry of an error's @Message.ExtendedInfo (Message.v1_1_1).
type message struct {
	id         string // the Base registry's message key, or a full ID
	text       string
	args       []string
	related    []string // RelatedProperties, JSON pointers ("#/Boot/BootSourceOverrideTarget")
	severity   string
	resolution string
}

func (m message) messageID() string {
	if strings.Contains(m.id, ".") {
		return m.id
	}
	return registry + m.id
}

func (m message) json() map[string]any {
	args := m.args
	if args == nil {
		args = []string{}
	}
	related := m.related
	if related == nil {
		related = []string{}
	}
	sev := m.severity
	if sev == "" {
		sev = "Warning"
	}
	return map[string]any{
		"@odata.type":       "#Message.v1_1_1.Message",
		"MessageId":         m.messageID(),
		"Message":           m.text,
		"MessageArgs":       args,
		"RelatedProperties": related,
		"Severity":          sev,
		"MessageSeverity":   sev,
		"Resolution":        m.resolution,
	}
}

// apiError is an error answer: a status and its messages.
type apiError struct {
	status  int
	msgs    []message
	general bool // code and message are GeneralError's even with one message
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", e.status)
	for _, m := range e.msgs {
		b.WriteString(": " + m.text)
	}
	return b.String()
}

// body is the Redfish error response (DSP0266 "Error responses"): code and
// message of the first message (as bmcweb does for one), all of them in
// @Message.ExtendedInfo.
func (e *apiError) body() map[string]any {
	info := make([]map[string]any, len(e.msgs))
	for i, m := range e.msgs {
		info[i] = m.json()
	}
	code, text := registry+"GeneralError", "A general error has occurred. See ExtendedInfo for more information."
	if len(e.msgs) == 1 && !e.general {
		code, text = e.msgs[0].messageID(), e.msgs[0].text
	}
	return map[string]any{"error": map[string]any{
		"code":                  code,
		"message":               text,
		"@Message.ExtendedInfo": info,
	}}
}

func newError(status int, msgs ...message) *apiError { return &apiError{status: status, msgs: msgs} }

func errNotFound(kind, name string) *apiError {
	return newError(http.StatusNotFound, message{id: "ResourceNotFound",
		text:       fmt.Sprintf("The requested resource of type %s named '%s' was not found.", kind, name),
		args:       []string{kind, name},
		severity:   "Critical",
		resolution: "Provide a valid resource identifier and resubmit the request."})
}

func errMethod(method string) *apiError {
	return newError(http.StatusMethodNotAllowed, message{id: "OperationNotAllowed",
		text:       fmt.Sprintf("The HTTP method %s is not allowed on this resource.", method),
		severity:   "Critical",
		resolution: "None."})
}

func errNoSession() *apiError {
	return newError(http.StatusUnauthorized, message{id: "NoValidSession",
		text:       "There is no valid session established with the implementation.",
		severity:   "Critical",
		resolution: "Establish a session before attempting any operations."})
}

func errSessionLimit(status int) *apiError {
	return newError(status, message{id: "SessionLimitExceeded",
		text:       "The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.",
		severity:   "Critical",
		resolution: "Reduce the number of other sessions before trying to establish the session or increase the limit of simultaneous sessions (if supported)."})
}

func errMalformed() *apiError {
	return newError(http.StatusBadRequest, message{id: "MalformedJSON",
		text:       "The request body submitted was malformed JSON and could not be parsed by the receiving service.",
		severity:   "Critical",
		resolution: "Ensure that the request body is valid JSON and resubmit the request."})
}

func msgPropertyUnknown(pointer, name string) message {
	return message{id: "PropertyUnknown",
		text:       fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", name),
		args:       []string{name},
		related:    []string{pointer},
		resolution: "Remove the unknown property from the request body and resubmit the request if the operation failed."}
}

func msgNotWritable(pointer, name string) message {
	return message{id: "PropertyNotWritable",
		text:       fmt.Sprintf("The property %s is a read-only property and cannot be assigned a value.", name),
		args:       []string{name},
		related:    []string{pointer},
		resolution: "Remove the property from the request body and resubmit the request if the operation failed."}
}

func msgNotInList(pointer, name, value string) message {
	return message{id: "PropertyValueNotInList",
		text:       fmt.Sprintf("The value '%s' for the property %s is not in the list of acceptable values.", value, name),
		args:       []string{value, name},
		related:    []string{pointer},
		resolution: "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed."}
}

func msgTypeError(pointer, name, value string) message {
	return message{id: "PropertyValueTypeError",
		text:       fmt.Sprintf("The value '%s' for the property %s is of a different type than the property can accept.", value, name),
		args:       []string{value, name},
		related:    []string{pointer},
		resolution: "Correct the value for the property in the request body and resubmit the request if the operation failed."}
}

func errActionParamMissing(action, param string) *apiError {
	return newError(http.StatusBadRequest, message{id: "ActionParameterMissing",
		text:       fmt.Sprintf("The action %s requires the parameter %s to be present in the request body.", action, param),
		args:       []string{action, param},
		related:    []string{"#/" + param},
		severity:   "Critical",
		resolution: "Supply the action with the required parameter in the request body when the request is resubmitted."})
}

func errActionParamValue(action, param, value string) *apiError {
	return newError(http.StatusBadRequest, message{id: "ActionParameterValueNotInList",
		text:       fmt.Sprintf("The value '%s' for the parameter %s in the action %s is not in the list of acceptable values.", value, param, action),
		args:       []string{value, param, action},
		related:    []string{"#/" + param},
		resolution: "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed."})
}

func errActionParamUnknown(action, param string) *apiError {
	return newError(http.StatusBadRequest, message{id: "ActionParameterUnknown",
		text:       fmt.Sprintf("The action %s was submitted with the invalid parameter %s.", action, param),
		args:       []string{action, param},
		related:    []string{"#/" + param},
		resolution: "Correct the invalid parameter and resubmit the request if the operation failed."})
}

func errActionParamType(action, param, value string) *apiError {
	return newError(http.StatusBadRequest, message{id: "ActionParameterValueTypeError",
		text:       fmt.Sprintf("The value '%s' for the parameter %s in the action %s is of a different type than the parameter can accept.", value, param, action),
		args:       []string{value, param, action},
		related:    []string{"#/" + param},
		resolution: "Correct the value for the parameter in the request body and resubmit the request if the operation failed."})
}

func errActionNotSupported(action string) *apiError {
	return newError(http.StatusBadRequest, message{id: "ActionNotSupported",
		text:       fmt.Sprintf("The action %s is not supported by the resource.", action),
		args:       []string{action},
		resolution: "The action supplied cannot be resubmitted to the implementation.  Perhaps the action was invalid, the wrong resource was the target or the implementation documentation may be of assistance."})
}

func errPrecondition() *apiError {
	return newError(http.StatusPreconditionFailed, message{id: "PreconditionFailed",
		text:       "The ETag supplied did not match the ETag required to change this resource.",
		severity:   "Critical",
		resolution: "Try the operation again using the appropriate ETag."})
}

func errInUse() *apiError {
	return newError(http.StatusConflict, message{id: "ResourceInUse",
		text:       "The change to the requested resource failed because the resource is in use or in transition.",
		resolution: "Remove the condition and resubmit the request if the operation failed."})
}

// errAlreadyInState is Dell iDRAC's answer to a power action the system is
// already in: 409, a general error whose extended information says so.
func errAlreadyInState(state PowerState) *apiError {
	word := "OFF"
	if state != PowerOff {
		word = "ON"
	}
	e := newError(http.StatusConflict, message{id: "IDRAC.2.8.PSU501",
		text:       "Server is already powered " + word + ".",
		severity:   "Informational",
		resolution: "No response action is required."})
	e.general = true
	return e
}

func errCreateMissing(prop string) *apiError {
	return newError(http.StatusBadRequest, message{id: "CreateFailedMissingReqProperties",
		text:       fmt.Sprintf("The create operation failed because the required property %s was missing from the request.", prop),
		args:       []string{prop},
		related:    []string{"#/" + prop},
		severity:   "Critical",
		resolution: "Correct the body to include the required property with a valid value and resubmit the request if the operation failed."})
}

func errInternal(err error) *apiError {
	return newError(http.StatusInternalServerError, message{id: "InternalError",
		text:       "The request failed due to an internal service error: " + err.Error(),
		severity:   "Critical",
		resolution: "Resubmit the request.  If the problem persists, consider resetting the service."})
}
