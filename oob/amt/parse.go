package amt

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The parsers of the MPS's answers: strict about what EIM relies on, and
// never quoting more than a little of a malformed answer.

func snippet(data []byte) string {
	const max = 80
	if len(data) > max {
		return fmt.Sprintf("%q…", data[:max])
	}
	return fmt.Sprintf("%q", data)
}

// parseToken reads the authorize answer {"token": "…"}.
func parseToken(data []byte) (string, error) {
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Token == "" {
		return "", errors.New("the login answer has no token")
	}
	return v.Token, nil
}

// parsePowerState reads {"powerstate": N, …}.
func parsePowerState(data []byte) (int, error) {
	var v struct {
		PowerState *int `json:"powerstate"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.PowerState == nil {
		return 0, fmt.Errorf("unexpected power state answer %s", snippet(data))
	}
	if *v.PowerState < 0 || *v.PowerState > 65535 {
		return 0, fmt.Errorf("power state %d out of range", *v.PowerState)
	}
	return *v.PowerState, nil
}

// parseActionResult reads {"Body": {"ReturnValue": N, "ReturnValueStr": "…"}}.
func parseActionResult(data []byte) (int, string, error) {
	var v struct {
		Body *struct {
			ReturnValue    *int   `json:"ReturnValue"`
			ReturnValueStr string `json:"ReturnValueStr"`
		} `json:"Body"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Body == nil || v.Body.ReturnValue == nil {
		return 0, "", fmt.Errorf("unexpected power action answer %s", snippet(data))
	}
	text := v.Body.ReturnValueStr
	if len(text) > 64 {
		text = text[:64]
	}
	return *v.Body.ReturnValue, text, nil
}

// parseCapabilities reads {"Power up": 2, …}; members that are not action
// numbers are left out.
func parseCapabilities(data []byte) (map[string]int, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("unexpected capabilities answer %s", snippet(data))
	}
	caps := map[string]int{}
	for k, v := range raw {
		var n int
		if json.Unmarshal(v, &n) == nil {
			caps[k] = n
		}
	}
	return caps, nil
}

// parseError reads the MPS's error bodies: {"error", "errorDescription"},
// {"message"}, or express-validator's {"errors": [{"msg"}]}.
func parseError(data []byte) string {
	var v struct {
		Error       json.RawMessage `json:"error"`
		Description string          `json:"errorDescription"`
		Message     string          `json:"message"`
		Errors      []struct {
			Msg string `json:"msg"`
		} `json:"errors"`
	}
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	var msg string
	if len(v.Error) > 0 {
		if json.Unmarshal(v.Error, &msg) != nil {
			msg = ""
		}
	}
	if msg == "" {
		msg = v.Message
	}
	if msg == "" && len(v.Errors) > 0 {
		msg = v.Errors[0].Msg
	}
	if v.Description != "" {
		if msg != "" {
			msg += " (" + v.Description + ")"
		} else {
			msg = v.Description
		}
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}
