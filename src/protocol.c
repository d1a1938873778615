typedef int sp_stub_protocol;
