
-------------------------------------------------------------------------
-- After the functions and privileges (the update from 1.0 to 1.1 ends
-- here): nothing of 1.0 is left to move that needs them.
-------------------------------------------------------------------------
