package redfish

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stmcginnis/gofish/schemas"
)

// FuzzAnswers: what the client makes of a service's error answers and of a
// finished task monitor's body: no panic, a kind for every answer, a
// bounded message.
func FuzzAnswers(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{409, `{"error":{"code":"Base.1.16.GeneralError","message":"A general error has occurred.","@Message.ExtendedInfo":[{"MessageId":"IDRAC.2.8.PSU501","Message":"Server is already powered OFF."}]}}`},
		{503, `{"error":{"code":"Base.1.16.SessionLimitExceeded","message":"The session establishment failed"}}`},
		{400, `{"error":{"code":"Base.1.16.ActionParameterValueNotInList","message":"x"}}`},
		{401, `{"error":{"code":"Base.1.16.NoValidSession"}}`},
		{200, `{"@odata.type":"#Task.v1_7_0.Task","TaskState":"Exception","TaskStatus":"Critical","Messages":[{"MessageId":"Base.1.16.TaskAborted","Message":"aborted"}]}`},
		{500, `not json`},
	} {
		f.Add(s.status, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		err := schemas.ConstructError(status, body)
		var rf *schemas.Error
		if !errors.As(err, &rf) {
			t.Fatalf("gofish made %T", err)
		}
		k, detail := classifyAnswer(status, rf.Code, rf.Message, extendedIDs(rf), extendedMessages(rf))
		if k < Failed || k > Ambiguous || len(detail) > 320 {
			t.Errorf("kind %v, detail of %d bytes", k, len(detail))
		}
		var task taskBody
		if json.Unmarshal(body, &task) == nil {
			c := &Client{root: "https://127.0.0.1"}
			_ = c.taskResult("reset", task)
		}
	})
}
