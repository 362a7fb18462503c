mod scan;
