typedef int sp_stub_outcome;
