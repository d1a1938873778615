typedef int sp_stub_result;
