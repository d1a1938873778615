typedef int sp_stub_request;
