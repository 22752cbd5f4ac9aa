package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stmcginnis/gofish/schemas"
)

// follow waits for an asynchronous action's task (a 202 answer with a task
// monitor) to complete, within cfg.TaskTimeout. nil info: the action was
// synchronous. A task that ends in Exception, Killed, Cancelled or
// Interrupted is Failed with its messages.
func (c *Client) follow(ctx context.Context, op string, info *schemas.TaskMonitorInfo) error {
	if info == nil {
		return nil
	}
	if info.TaskMonitor == "" {
		return &Error{Kind: Failed, Op: op, URL: c.root, Detail: "the service answered 202 without a task monitor"}
	}
	tctx, cancel := context.WithTimeout(ctx, c.cfg.TaskTimeout)
	defer cancel()
	resp, err := schemas.WaitForTaskMonitor(tctx, c.with(tctx), c.cfg.TaskPoll, info, nil)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return &Error{Kind: Failed, Op: op, URL: c.root, cause: err,
				Detail: fmt.Sprintf("task %s not done after %s", info.TaskMonitor, c.cfg.TaskTimeout)}
		}
		return c.classify(ctx, op, err)
	}
	defer schemas.DeferredCleanupHTTPResponse(resp)
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	var task taskBody
	if err := jsonDecode(resp, &task); err != nil {
		return nil // the operation's own answer, not a Task: done
	}
	return c.taskResult(op, task)
}

// taskBody is what follow reads of a completed task monitor's answer.
type taskBody struct {
	ODataType  string `json:"@odata.type"`
	TaskState  string
	TaskStatus string
	Messages   []struct {
		MessageID string `json:"MessageId"`
		Message   string
	}
}

func (c *Client) taskResult(op string, t taskBody) error {
	if !strings.Contains(t.ODataType, "Task.") && t.TaskState == "" {
		return nil // not a Task
	}
	switch t.TaskState {
	case "Exception", "Killed", "Cancelled", "Interrupted":
	default:
		if t.TaskStatus != "Critical" {
			return nil
		}
	}
	var msgs []string
	for _, m := range t.Messages {
		if m.Message != "" {
			msgs = append(msgs, m.Message)
		} else if m.MessageID != "" {
			msgs = append(msgs, m.MessageID)
		}
	}
	detail := "task ended " + t.TaskState
	if len(msgs) > 0 {
		detail += ": " + strings.Join(msgs, "; ")
	}
	return &Error{Kind: Failed, Op: op, URL: c.root, Detail: c.redact(detail)}
}
