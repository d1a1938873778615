typedef int sp_stub_ledger;
