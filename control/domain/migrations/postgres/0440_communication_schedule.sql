-- A dispatch's own calling schedule (the agent path's `schedule`): the checked
-- `{"strategy", "args"}` JSON text, read in the communication's time zone instead of the
-- agent's `calling_schedule`; NULL: the agent's applies.
ALTER TABLE communications ADD COLUMN schedule TEXT;
